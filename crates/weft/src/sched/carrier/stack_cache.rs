//! A carrier's stack cache: free stack slots of the default pool kept by
//! the carrier ([`Carrier::stack_cache`], touched only by its own thread),
//! so that a spawn-and-finish loop takes and returns stacks without the
//! pool's lock, and reuses already resident stacks (Go's `gfget`).

use super::Carrier;

/// Stacks a carrier keeps for itself before giving them back to the pool.
const LOCAL_STACK_CACHE: usize = 64;

impl Carrier {
    /// Takes a stack slot for a new thread, from this carrier's cache.
    pub(crate) fn alloc_default_stack(&self) -> std::io::Result<crate::stack::Stack> {
        let pool = self.shared.stacks;
        let mut cache = self.stack_cache.borrow_mut();
        if cache.is_empty() {
            pool.alloc_batch(&mut cache, LOCAL_STACK_CACHE / 2)?;
        }
        let slot = cache.pop().expect("alloc_batch returned at least one slot");
        Ok(pool.adopt(slot))
    }

    pub(in crate::sched) fn recycle_stack(&self, stack: crate::stack::Stack, deep: bool) {
        if !std::ptr::eq(stack.pool(), self.shared.stacks) {
            stack.release(deep);
            return;
        }
        if deep {
            stack.trim();
        }
        let slot = stack.into_slot();
        let mut cache = self.stack_cache.borrow_mut();
        cache.push(slot);
        if cache.len() > LOCAL_STACK_CACHE {
            let mut spill: Vec<usize> = cache.drain(LOCAL_STACK_CACHE / 2..).collect();
            self.shared.stacks.release_batch(&mut spill);
        }
    }
}
