//! The `serde` feature (which this package's dev-dependency on itself turns on for its tests):
//! an `Arc` writes what its value writes and reads back into a new `Arc` of an equal value, for
//! sized values, `str` and slices; a `Weak` writes its value while it upgrades and `null` after,
//! and reads back into a `Weak` to nothing; sharing is not preserved (as with serde's `rc`
//! feature for `std::sync::Arc`); a failed read drops what it read once and makes no `Arc`.
//!
//! Without the feature (a build of the published package, which drops the path dependency on
//! itself) the file is empty.
#![cfg(feature = "serde")]
// Not under loom: paygo::Arc and Weak are not built there.
#![cfg(not(loom))]

use paygo::{collect, default_domain, Arc, Weak};
use serde::{Deserialize, Serialize};
use std::sync::atomic::{AtomicUsize, Ordering};

#[derive(Serialize, Deserialize, Debug, PartialEq, Clone)]
struct Settings {
    name: String,
    limits: Vec<u32>,
}

/// A document of `paygo::Arc`s.
#[derive(Serialize, Deserialize, Debug)]
struct Shared {
    settings: Arc<Settings>,
    title: Arc<str>,
    sizes: Arc<[u64]>,
    parent: Weak<Settings>,
}

/// The same document with the values in place: the model of what `Shared` writes.
#[derive(Serialize)]
struct Plain {
    settings: Settings,
    title: String,
    sizes: Vec<u64>,
    parent: Option<Settings>,
}

fn settings() -> Settings {
    Settings {
        name: "cache".into(),
        limits: vec![4096, 16],
    }
}

#[test]
fn an_arc_writes_its_value_and_reads_back_into_a_new_arc() {
    let parent = Arc::new(Settings {
        name: "parent".into(),
        limits: vec![1],
    });
    let doc = Shared {
        settings: Arc::new(settings()),
        title: Arc::from("pages"),
        sizes: Arc::from(vec![1u64, 2, 3]),
        parent: Arc::downgrade(&parent),
    };
    let model = Plain {
        settings: settings(),
        title: "pages".into(),
        sizes: vec![1, 2, 3],
        parent: Some((*parent).clone()),
    };
    let json = serde_json::to_string(&doc).unwrap();
    assert_eq!(json, serde_json::to_string(&model).unwrap());

    let back: Shared = serde_json::from_str(&json).unwrap();
    assert_eq!(*back.settings, settings());
    assert_eq!(&*back.title, "pages");
    assert_eq!(&*back.sizes, &[1, 2, 3]);
    assert!(
        !Arc::ptr_eq(&back.settings, &doc.settings),
        "a new allocation"
    );
    assert_eq!(Arc::strong_count(&back.settings), 1);
    assert_eq!(Arc::strong_count(&back.title), 1);
    // The value read for the `Weak` had no `Arc` to keep it.
    assert!(back.parent.upgrade().is_none());
    assert_eq!(Arc::weak_count(&parent), 1, "the document's own Weak");
}

#[test]
fn a_weak_writes_null_once_its_value_is_gone() {
    let a = Arc::new(settings());
    let w = Arc::downgrade(&a);
    assert_eq!(
        serde_json::to_string(&w).unwrap(),
        serde_json::to_string(&Some(settings())).unwrap()
    );
    assert_eq!(Arc::strong_count(&a), 1, "the upgrade was given back");
    drop(a);
    // A value left to the collector is dropped by now.
    collect(default_domain());
    assert_eq!(serde_json::to_string(&w).unwrap(), "null");
    assert_eq!(
        serde_json::to_string(&Weak::<Settings>::new()).unwrap(),
        "null"
    );
    let none: Weak<Settings> = serde_json::from_str("null").unwrap();
    assert!(none.upgrade().is_none());
}

#[test]
fn sharing_is_not_preserved() {
    let a = Arc::new(7u32);
    let list = vec![a.clone(), a.clone()];
    let json = serde_json::to_string(&list).unwrap();
    assert_eq!(json, "[7,7]");
    let back: Vec<Arc<u32>> = serde_json::from_str(&json).unwrap();
    assert!(!Arc::ptr_eq(&back[0], &back[1]));
    assert_eq!(Arc::strong_count(&a), 3);
}

static MADE: AtomicUsize = AtomicUsize::new(0);
static DROPPED: AtomicUsize = AtomicUsize::new(0);

/// A number that counts how many were read and how many dropped.
#[derive(Debug)]
struct Counted(#[allow(dead_code)] u32);

impl<'de> Deserialize<'de> for Counted {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let v = u32::deserialize(d)?;
        MADE.fetch_add(1, Ordering::SeqCst);
        Ok(Counted(v))
    }
}

impl Drop for Counted {
    fn drop(&mut self) {
        DROPPED.fetch_add(1, Ordering::SeqCst);
    }
}

#[test]
fn a_failed_read_drops_what_it_read_once_and_makes_no_arc() {
    let err = serde_json::from_str::<Arc<[Counted]>>("[1, 2, \"three\"]").unwrap_err();
    assert!(err.is_data(), "{err}");
    assert_eq!(MADE.load(Ordering::SeqCst), 2);
    assert_eq!(DROPPED.load(Ordering::SeqCst), 2);
    assert!(serde_json::from_str::<Arc<str>>("3").is_err());
    assert!(serde_json::from_str::<Arc<Settings>>("{\"name\": 1}").is_err());

    let ok: Arc<[Counted]> = serde_json::from_str("[4, 5]").unwrap();
    assert_eq!(ok.len(), 2);
    assert_eq!(MADE.load(Ordering::SeqCst), 4);
    drop(ok);
    collect(default_domain());
    assert_eq!(
        DROPPED.load(Ordering::SeqCst),
        4,
        "each value dropped once, with its Arc"
    );
}
