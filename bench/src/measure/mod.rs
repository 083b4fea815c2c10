//! Measurements taken from outside the controller under test.

pub mod actions;
pub mod audit;
pub mod bystander;
pub mod content;
pub mod procfs;
pub mod stats;
pub mod tracker;
