//! Result tables: markdown for files and terminals that render it, aligned
//! columns for the console.

/// A table of text cells with a header.
///
/// # Examples
///
/// ```
/// use weft_bench_support::table::Table;
///
/// let mut t = Table::new(["benchmark", "median", "unit"]).right([1]);
/// t.row(["spawn/weft", "719", "ns"]);
/// t.gap(); // a blank line in the console table, nothing in markdown
/// t.row(["sleepers/100k", "1241", "ms"]);
/// assert_eq!(
///     t.text(),
///     "benchmark      median  unit\n\
///      -------------  ------  ----\n\
///      spawn/weft        719  ns\n\
///      \n\
///      sleepers/100k    1241  ms\n"
/// );
/// assert!(t.markdown().starts_with("| benchmark | median | unit |\n|---|---|---|\n"));
/// ```
#[derive(Clone, Debug, Default)]
pub struct Table {
    header: Vec<String>,
    right: Vec<bool>,
    // `None` is a gap between groups of rows.
    rows: Vec<Option<Vec<String>>>,
}

impl Table {
    /// A table with these column headings, every column left-aligned.
    pub fn new<S: Into<String>>(header: impl IntoIterator<Item = S>) -> Table {
        let header: Vec<String> = header.into_iter().map(Into::into).collect();
        Table {
            right: vec![false; header.len()],
            header,
            rows: Vec::new(),
        }
    }

    /// Right-aligns these columns (by index) in [`text`](Self::text).
    pub fn right(mut self, columns: impl IntoIterator<Item = usize>) -> Table {
        for c in columns {
            if let Some(r) = self.right.get_mut(c) {
                *r = true;
            }
        }
        self
    }

    /// Adds a row; missing cells are empty, extra cells are kept (and get
    /// an empty heading).
    pub fn row<S: Into<String>>(&mut self, cells: impl IntoIterator<Item = S>) -> &mut Table {
        self.rows
            .push(Some(cells.into_iter().map(Into::into).collect()));
        self
    }

    /// Separates groups of rows: a blank line in [`text`](Self::text).
    pub fn gap(&mut self) -> &mut Table {
        self.rows.push(None);
        self
    }

    /// The number of rows (gaps not counted).
    pub fn len(&self) -> usize {
        self.rows.iter().flatten().count()
    }

    /// Whether the table has no row.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn columns(&self) -> usize {
        self.rows
            .iter()
            .flatten()
            .map(Vec::len)
            .chain([self.header.len()])
            .max()
            .unwrap_or(0)
    }

    /// GitHub-flavoured markdown, one line per row; `|` in a cell is escaped.
    pub fn markdown(&self) -> String {
        let n = self.columns();
        let line = |cells: &[String]| {
            let mut s = String::from("|");
            for i in 0..n {
                let c = cells.get(i).map_or("", String::as_str);
                s.push(' ');
                s.push_str(&c.replace('|', "\\|"));
                s.push_str(" |");
            }
            s.push('\n');
            s
        };
        let mut out = line(&self.header);
        out.push('|');
        out.push_str(&"---|".repeat(n));
        out.push('\n');
        for row in self.rows.iter().flatten() {
            out.push_str(&line(row));
        }
        out
    }

    /// Aligned columns two spaces apart, a dashed rule under the header,
    /// no trailing blanks.
    pub fn text(&self) -> String {
        let n = self.columns();
        let mut widths = vec![0; n];
        for cells in self.rows.iter().flatten().chain([&self.header]) {
            for (w, c) in widths.iter_mut().zip(cells) {
                *w = (*w).max(c.chars().count());
            }
        }
        let line = |cells: &[String]| {
            let parts: Vec<String> = (0..n)
                .map(|i| {
                    let c = cells.get(i).map_or("", String::as_str);
                    let w = widths[i];
                    if self.right.get(i).copied().unwrap_or(false) {
                        format!("{c:>w$}")
                    } else {
                        format!("{c:<w$}")
                    }
                })
                .collect();
            parts.join("  ").trim_end().to_string() + "\n"
        };
        let mut out = line(&self.header);
        let rule: Vec<String> = widths.iter().map(|&w| "-".repeat(w)).collect();
        out.push_str(&rule.join("  "));
        out.push('\n');
        for row in &self.rows {
            match row {
                Some(cells) => out.push_str(&line(cells)),
                None => out.push('\n'),
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ragged_rows_and_pipes() {
        let mut t = Table::new(["a", "b"]);
        t.row(["x|y"]);
        t.row(["1", "2", "3"]);
        assert_eq!(t.len(), 2);
        assert_eq!(
            t.markdown(),
            "| a | b |  |\n|---|---|---|\n| x\\|y |  |  |\n| 1 | 2 | 3 |\n"
        );
        assert_eq!(t.text(), "a    b\n---  -  -\nx|y\n1    2  3\n");
    }

    #[test]
    fn widths_count_characters_not_bytes() {
        let mut t = Table::new(["µs"]).right([0]);
        t.row(["1"]);
        assert_eq!(t.text(), "µs\n--\n 1\n");
    }
}
