//! The record of fences handed out, and the fencing property every model
//! with fences checks at each grant: a fence is never handed out twice,
//! and a fence whose commit began after another fence was handed out is
//! larger (ordered by commit).

/// Fences handed out so far (each below 64).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Fences {
    /// Bit `f` set when fence `f` was handed out.
    granted: u64,
    /// The largest fence handed out.
    max: u8,
}

/// The fencing property broken.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Broken {
    /// A fence handed out twice.
    Duplicate(u8),
    /// A fence no larger than `earlier`, handed out before its commit began.
    OutOfOrder {
        /// The fence handed out.
        fence: u8,
        /// The largest fence handed out before its commit began.
        earlier: u8,
    },
}

impl Fences {
    /// The floor a commit beginning now must pass: the largest fence
    /// handed out so far.
    pub fn floor(&self) -> u8 {
        self.max
    }

    /// Hands out `fence`, whose commit began when the floor was `floor`.
    ///
    /// # Errors
    ///
    /// When the fence was handed out before, or is not above `floor`.
    pub fn grant(&mut self, fence: u8, floor: u8) -> Result<(), Broken> {
        if self.granted & (1 << fence) != 0 {
            return Err(Broken::Duplicate(fence));
        }
        if fence <= floor {
            return Err(Broken::OutOfOrder {
                fence,
                earlier: floor,
            });
        }
        self.granted |= 1 << fence;
        self.max = self.max.max(fence);
        Ok(())
    }

    /// The record as bytes, for a state's key.
    pub fn encode(&self) -> [u8; 9] {
        let mut out = [0; 9];
        out[..8].copy_from_slice(&self.granted.to_le_bytes());
        out[8] = self.max;
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fences_are_unique_and_above_the_floor() {
        let mut f = Fences::default();
        assert_eq!(f.floor(), 0);
        assert_eq!(f.grant(2, 0), Ok(()));
        assert_eq!(f.floor(), 2);
        // Began before 2 was handed out: 1 is allowed, once.
        assert_eq!(f.grant(1, 0), Ok(()));
        assert_eq!(f.floor(), 2);
        assert_eq!(f.grant(1, 0), Err(Broken::Duplicate(1)));
        assert_eq!(f.grant(2, 1), Err(Broken::Duplicate(2)));
        assert_eq!(
            f.grant(3, 3),
            Err(Broken::OutOfOrder {
                fence: 3,
                earlier: 3
            })
        );
        assert_eq!(f.grant(3, 2), Ok(()));
        assert_ne!(f.encode(), Fences::default().encode());
    }
}
