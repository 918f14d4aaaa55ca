//! A tenant's lifecycle as sagas (`spec/fleet-operations.md`, "Durable
//! sagas with verified postconditions"): onboarding when its folder
//! appears in git, a change when its `tenant.yaml` changes, offboarding
//! when the folder goes. Every step has an owner (its actuator) and a
//! postcondition checked before the next one starts; a missing actuator
//! is an explicit `Waiting`, never a skip. The steps and their record run
//! on the shared engine ([`crate::saga`]); the durable status is the
//! cluster-scoped `Tenant` resource ([`crate::crd::tenant::Tenant`]).
//!
//! [`plan`] is the pure core: which steps each saga has, what a change
//! touches, how a step's outcome moves the Tenant's phase, and when the
//! namespace of an offboarded tenant may go.

pub mod access;
pub mod declare;
pub mod engine;
pub mod plan;
pub mod steps;
