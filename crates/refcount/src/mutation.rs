//! The bug switch of the loom models (`--cfg paygo_loom_bug`): a scheme lists the mutations its
//! models must catch in an enum `Bug` (`Copy + PartialEq`, with a `None` variant), and a model
//! switches one on before it runs (`bug::SWITCH`); the scheme's code asks `bug(Bug::X)` where
//! the mutation changes it. Without the cfg, `bug` is `false` and compiles away.

/// Defines, in the module of a scheme with an enum `Bug`, `fn bug(which: Bug) -> bool` and the
/// switch `mod bug { SWITCH }`, with `bug::with(which, model)` for the models (see the module
/// docs).
macro_rules! bug_switch {
    () => {
        /// Whether the mutation `which` is switched on (never without `--cfg paygo_loom_bug`).
        #[inline(always)]
        fn bug(which: Bug) -> bool {
            #[cfg(paygo_loom_bug)]
            {
                bug::SWITCH.with(|s| s.get() == which)
            }
            #[cfg(not(paygo_loom_bug))]
            {
                let _ = which;
                false
            }
        }

        /// The bug switch of the loom models.
        #[cfg(paygo_loom_bug)]
        pub(crate) mod bug {
            use core::cell::Cell;

            std::thread_local! {
                /// The mutation switched on. A std thread-local: loom runs every model thread
                /// on the test's OS thread, so the test's setting holds in all of them.
                pub(crate) static SWITCH: Cell<super::Bug> =
                    const { Cell::new(super::Bug::None) };
            }

            /// Runs `model` with the mutation `which` switched on.
            #[cfg(all(test, loom))]
            pub(crate) fn with(which: super::Bug, model: fn()) {
                SWITCH.with(|s| s.set(which));
                model();
            }
        }
    };
}

pub(crate) use bug_switch;
