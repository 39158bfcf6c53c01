//! [`Transaction`]: `BEGIN` … `COMMIT`, rolled back unless committed.

use std::fmt;

use tokio_postgres::types::{ToSql, Type};
use tokio_postgres::{Row, SimpleQueryMessage, Statement, ToStatement};

use crate::conn::Connection;
use crate::error::Result;

/// A database transaction on a [`Connection`] (from
/// [`Connection::transaction`]), or a savepoint inside one (from
/// [`Transaction::transaction`]).
///
/// It has the connection's query calls. [`commit`](Transaction::commit)
/// ends it; dropping it without committing rolls it back — also when the
/// thread unwinds from a panic — so a pooled connection always goes back
/// to its pool outside any transaction.
///
/// ```no_run
/// # fn demo(conn: &mut weft_pg::Connection) -> weft_pg::Result<()> {
/// let mut tx = conn.transaction()?;
/// tx.execute("UPDATE account SET balance = balance - 10 WHERE id = $1", &[&1i32])?;
/// tx.execute("UPDATE account SET balance = balance + 10 WHERE id = $1", &[&2i32])?;
/// tx.commit()?;
/// # Ok(()) }
/// ```
pub struct Transaction<'a> {
    conn: &'a mut Connection,
    /// 0 for the outer transaction, n for savepoint `weft_sp_n`.
    depth: u32,
    done: bool,
}

impl fmt::Debug for Transaction<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Transaction")
            .field("depth", &self.depth)
            .finish_non_exhaustive()
    }
}

impl<'a> Transaction<'a> {
    pub(crate) fn new(conn: &'a mut Connection, depth: u32) -> Transaction<'a> {
        Transaction {
            conn,
            depth,
            done: false,
        }
    }

    fn end_sql(&self, commit: bool) -> String {
        match (self.depth, commit) {
            (0, true) => "COMMIT".into(),
            (0, false) => "ROLLBACK".into(),
            (n, true) => format!("RELEASE SAVEPOINT weft_sp_{n}"),
            (n, false) => format!("ROLLBACK TO SAVEPOINT weft_sp_{n}"),
        }
    }

    /// Commits the transaction (or releases the savepoint). Not
    /// interruptible: an interrupt stays pending until it is done.
    ///
    /// # Errors
    ///
    /// The server's error; e.g. SQLSTATE `40001` for a serialization
    /// failure. The transaction is over either way.
    pub fn commit(mut self) -> Result<()> {
        self.done = true;
        let sql = self.end_sql(true);
        self.conn.batch_uninterruptible(&sql)
    }

    /// Rolls the transaction back (or back to the savepoint).
    ///
    /// # Errors
    ///
    /// The server's error.
    pub fn rollback(mut self) -> Result<()> {
        self.done = true;
        let sql = self.end_sql(false);
        self.conn.batch_uninterruptible(&sql)
    }

    /// Starts a nested transaction: a savepoint that this transaction
    /// survives rolling back to.
    ///
    /// # Errors
    ///
    /// The server's error.
    pub fn transaction(&mut self) -> Result<Transaction<'_>> {
        let depth = self.depth + 1;
        self.conn
            .batch_execute(&format!("SAVEPOINT weft_sp_{depth}"))?;
        Ok(Transaction::new(self.conn, depth))
    }

    /// See [`Connection::query`].
    ///
    /// # Errors
    ///
    /// As [`Connection::query`].
    pub fn query<T>(&mut self, statement: &T, params: &[&(dyn ToSql + Sync)]) -> Result<Vec<Row>>
    where
        T: ?Sized + ToStatement,
    {
        self.conn.query(statement, params)
    }

    /// See [`Connection::query_one`].
    ///
    /// # Errors
    ///
    /// As [`Connection::query_one`].
    pub fn query_one<T>(&mut self, statement: &T, params: &[&(dyn ToSql + Sync)]) -> Result<Row>
    where
        T: ?Sized + ToStatement,
    {
        self.conn.query_one(statement, params)
    }

    /// See [`Connection::query_opt`].
    ///
    /// # Errors
    ///
    /// As [`Connection::query_opt`].
    pub fn query_opt<T>(
        &mut self,
        statement: &T,
        params: &[&(dyn ToSql + Sync)],
    ) -> Result<Option<Row>>
    where
        T: ?Sized + ToStatement,
    {
        self.conn.query_opt(statement, params)
    }

    /// See [`Connection::query_typed`].
    ///
    /// # Errors
    ///
    /// As [`Connection::query`].
    pub fn query_typed(
        &mut self,
        sql: &str,
        params: &[(&(dyn ToSql + Sync), Type)],
    ) -> Result<Vec<Row>> {
        self.conn.query_typed(sql, params)
    }

    /// See [`Connection::execute`].
    ///
    /// # Errors
    ///
    /// As [`Connection::execute`].
    pub fn execute<T>(&mut self, statement: &T, params: &[&(dyn ToSql + Sync)]) -> Result<u64>
    where
        T: ?Sized + ToStatement,
    {
        self.conn.execute(statement, params)
    }

    /// See [`Connection::prepare`].
    ///
    /// # Errors
    ///
    /// As [`Connection::prepare`].
    pub fn prepare(&mut self, sql: &str) -> Result<Statement> {
        self.conn.prepare(sql)
    }

    /// See [`Connection::batch_execute`].
    ///
    /// # Errors
    ///
    /// As [`Connection::batch_execute`].
    pub fn batch_execute(&mut self, sql: &str) -> Result<()> {
        self.conn.batch_execute(sql)
    }

    /// See [`Connection::simple_query`].
    ///
    /// # Errors
    ///
    /// As [`Connection::simple_query`].
    pub fn simple_query(&mut self, sql: &str) -> Result<Vec<SimpleQueryMessage>> {
        self.conn.simple_query(sql)
    }
}

impl Drop for Transaction<'_> {
    fn drop(&mut self) {
        if !self.done {
            // Not interruptible; a failure marks the connection broken so
            // that a pool discards it instead of reusing a session that
            // may still be inside the transaction.
            let sql = self.end_sql(false);
            if self.conn.batch_uninterruptible(&sql).is_err() {
                self.conn.mark_broken();
            }
        }
    }
}
