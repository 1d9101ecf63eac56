//! The `oplog-counter` RefCounter scheme passes the workspace's conformance suite.

#![cfg(not(loom))]

use oplog::OpLogCounter;

refcount::conformance_suite!(oplog_counter, OpLogCounter::default());
refcount::conformance_suite!(oplog_counter_one_way, OpLogCounter::with_ways(1));
