//! [`Lcg`]: a small seeded generator, so that a run's "random" choices (a store's shape, the
//! moments a daemon is killed) are the same every time for the same seed.

/// A 64-bit linear congruential generator, high bits out.
pub struct Lcg(pub u64);

impl Lcg {
    /// A generator whose seed is mixed first, so that small seeds (0, 1, 2…) differ at once.
    pub fn new(seed: u64) -> Lcg {
        Lcg(seed ^ 0x5DEE_CE66_D1CE_5EED)
    }

    pub fn next_u32(&mut self) -> u32 {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        (self.0 >> 33) as u32
    }

    /// Uniform in `0..n`.
    pub fn below(&mut self, n: u64) -> u64 {
        u64::from(self.next_u32()) % n
    }

    /// Uniform in `lo..=hi`.
    pub fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.below(hi - lo + 1)
    }
}

#[cfg(test)]
mod tests {
    use super::Lcg;

    #[test]
    fn the_same_seed_gives_the_same_numbers_within_range() {
        let (mut a, mut b) = (Lcg::new(7), Lcg::new(7));
        for _ in 0..100 {
            let x = a.range(3, 9);
            assert_eq!(x, b.range(3, 9));
            assert!((3..=9).contains(&x));
        }
    }
}
