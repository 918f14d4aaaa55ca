//! The tenant registry frames: `tenant_register` and `support_lane`
//! (operator -> control plane) and their acknowledgement `register_ack`
//! (control plane -> operator).
//!
//! Guarantees: every field has a byte bound ([`limits`]) that
//! [`Registration::validate`] checks, and the receiver applies it (an
//! invalid one closes the connection like any malformed frame, so the
//! sender checks first and never queues one). A registration is a whole
//! record for its key (`tenant` and which record), newest `generation`
//! wins, so applying one twice, or an older one after a newer one,
//! changes nothing: a resend is safe.

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// Byte bounds of the fields.
pub mod limits {
    pub const ID: usize = 64;
    /// A tenant is a DNS label.
    pub const TENANT: usize = 63;
    pub const TIER: usize = 63;
    pub const WAVE: usize = 63;
    pub const LANE: usize = 63;
    pub const CONTACT: usize = 254;
    pub const CONTACTS: usize = 32;
    /// A Kubernetes uid is 36 bytes.
    pub const UID: usize = 64;
}

/// Operator -> control plane: a tenant of this deployment, enrolled (its
/// onboarding's identity step) or withdrawn (its offboarding).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TenantRegister {
    /// Names this record for the acknowledgement; the same record has the
    /// same id ([`Registration::id_of`]).
    pub id: String,
    pub tenant: String,
    /// The `Tenant` resource's uid: a record of another uid (the resource
    /// deleted and made again, its generation counting from 1 anew)
    /// replaces the stored one whatever its generation.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub uid: String,
    /// The `Tenant` resource's generation the record is for; the control
    /// plane keeps the newest of one uid.
    pub generation: i64,
    /// `false`: offboarded.
    pub enrolled: bool,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub tier: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub wave: String,
}

/// Operator -> control plane: a tenant's support lane, or none
/// (`lane: null`, unregistered).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SupportLane {
    pub id: String,
    pub tenant: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub uid: String,
    pub generation: i64,
    pub lane: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub contacts: Vec<String>,
}

/// Control plane -> operator: the record `id` is stored durably (or a
/// newer one of its key was already).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RegisterAck {
    pub id: String,
}

/// Either record, as the operator holds it until acknowledged.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Registration {
    Tenant(TenantRegister),
    Support(SupportLane),
}

/// Which record of a tenant.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum RecordKind {
    Tenant,
    Support,
}

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum RegistrationError {
    #[error("field {0} is empty")]
    Empty(&'static str),
    #[error("field {field} has {len} bytes; the limit is {max}")]
    TooLong {
        field: &'static str,
        len: usize,
        max: usize,
    },
    #[error("field tenant {0:?} is not a DNS label")]
    BadTenant(String),
    #[error("field contacts has {0} entries; the limit is {max}", max = limits::CONTACTS)]
    TooManyContacts(usize),
    #[error("field generation is {0}; it must not be negative")]
    BadGeneration(i64),
}

fn bounded(field: &'static str, v: &str, max: usize) -> Result<(), RegistrationError> {
    if v.len() > max {
        return Err(RegistrationError::TooLong {
            field,
            len: v.len(),
            max,
        });
    }
    Ok(())
}

impl Registration {
    /// A tenant's enrollment record.
    pub fn tenant(tenant: &str, generation: i64, enrolled: bool, tier: &str, wave: &str) -> Self {
        let mut r = TenantRegister {
            id: String::new(),
            tenant: tenant.to_owned(),
            uid: String::new(),
            generation,
            enrolled,
            tier: tier.to_owned(),
            wave: wave.to_owned(),
        };
        r.id = Self::id_of(&serde_json::to_vec(&r).unwrap_or_default());
        Registration::Tenant(r)
    }

    /// A tenant's support lane record (`None`: no lane).
    pub fn support(tenant: &str, generation: i64, lane: Option<&str>, contacts: &[String]) -> Self {
        let mut r = SupportLane {
            id: String::new(),
            tenant: tenant.to_owned(),
            uid: String::new(),
            generation,
            lane: lane.map(str::to_owned),
            contacts: if lane.is_some() {
                contacts.to_vec()
            } else {
                Vec::new()
            },
        };
        r.id = Self::id_of(&serde_json::to_vec(&r).unwrap_or_default());
        Registration::Support(r)
    }

    /// The record for the `Tenant` resource of `uid` (its id anew).
    #[must_use]
    pub fn with_uid(mut self, uid: &str) -> Self {
        match &mut self {
            Registration::Tenant(r) => {
                r.uid = uid.to_owned();
                r.id = String::new();
                r.id = Self::id_of(&serde_json::to_vec(r).unwrap_or_default());
            }
            Registration::Support(r) => {
                r.uid = uid.to_owned();
                r.id = String::new();
                r.id = Self::id_of(&serde_json::to_vec(r).unwrap_or_default());
            }
        }
        self
    }

    /// The id of a record: a hash of its content (with an empty id), so
    /// an operator that restarts and registers the same record again
    /// sends the same id.
    pub fn id_of(content: &[u8]) -> String {
        hex::encode(&Sha256::digest(content)[..16])
    }

    pub fn id(&self) -> &str {
        match self {
            Registration::Tenant(r) => &r.id,
            Registration::Support(r) => &r.id,
        }
    }

    pub fn tenant_name(&self) -> &str {
        match self {
            Registration::Tenant(r) => &r.tenant,
            Registration::Support(r) => &r.tenant,
        }
    }

    pub fn kind(&self) -> RecordKind {
        match self {
            Registration::Tenant(_) => RecordKind::Tenant,
            Registration::Support(_) => RecordKind::Support,
        }
    }

    pub fn generation(&self) -> i64 {
        match self {
            Registration::Tenant(r) => r.generation,
            Registration::Support(r) => r.generation,
        }
    }

    /// The frame that carries it.
    pub fn frame(&self) -> super::Frame {
        match self {
            Registration::Tenant(r) => super::Frame::TenantRegister(r.clone()),
            Registration::Support(r) => super::Frame::SupportLane(r.clone()),
        }
    }

    /// Whether the receiver takes it: the bounds of [`limits`].
    pub fn validate(&self) -> Result<(), RegistrationError> {
        let (id, tenant, generation) = (self.id(), self.tenant_name(), self.generation());
        if id.is_empty() {
            return Err(RegistrationError::Empty("id"));
        }
        bounded("id", id, limits::ID)?;
        if !crate::names::is_dns1123_label(tenant) {
            return Err(RegistrationError::BadTenant(tenant.to_owned()));
        }
        if generation < 0 {
            return Err(RegistrationError::BadGeneration(generation));
        }
        let uid = match self {
            Registration::Tenant(r) => &r.uid,
            Registration::Support(r) => &r.uid,
        };
        bounded("uid", uid, limits::UID)?;
        match self {
            Registration::Tenant(r) => {
                bounded("tier", &r.tier, limits::TIER)?;
                bounded("wave", &r.wave, limits::WAVE)?;
            }
            Registration::Support(r) => {
                if let Some(lane) = &r.lane {
                    if lane.is_empty() {
                        return Err(RegistrationError::Empty("lane"));
                    }
                    bounded("lane", lane, limits::LANE)?;
                }
                if r.contacts.len() > limits::CONTACTS {
                    return Err(RegistrationError::TooManyContacts(r.contacts.len()));
                }
                for c in &r.contacts {
                    bounded("contacts", c, limits::CONTACT)?;
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::Frame;

    #[test]
    fn the_same_record_has_the_same_id_and_another_another() {
        let a = Registration::tenant("acme", 3, true, "standard", "canary");
        let b = Registration::tenant("acme", 3, true, "standard", "canary");
        let c = Registration::tenant("acme", 4, true, "standard", "canary");
        assert_eq!(a.id(), b.id());
        assert_ne!(a.id(), c.id());
        assert_eq!(a.id().len(), 32);
        let lane = Registration::support("acme", 3, Some("gold"), &["ops@acme.test".into()]);
        let none = Registration::support("acme", 3, None, &["ops@acme.test".into()]);
        assert_ne!(lane.id(), none.id());
        // No lane, no contacts.
        assert!(matches!(none, Registration::Support(ref s) if s.contacts.is_empty()));
        assert!(a.validate().is_ok() && lane.validate().is_ok() && none.validate().is_ok());
        // Another resource of the same name: another record.
        let other = a.clone().with_uid("2f0c-uid");
        assert_ne!(other.id(), a.id());
        assert_eq!(other.id(), a.clone().with_uid("2f0c-uid").id());
        assert!(matches!(other, Registration::Tenant(ref t) if t.uid == "2f0c-uid"));
    }

    #[test]
    fn frames_round_trip_and_bounds_are_checked() {
        let lane = Registration::support("acme", 1, Some("gold"), &["ops@acme.test".into()]);
        let json = lane.frame().to_json().unwrap();
        assert!(json.contains(r#""type":"support_lane""#), "{json}");
        assert_eq!(Frame::from_json(&json).unwrap(), lane.frame());
        let t = Registration::tenant("acme", 1, false, "", "");
        let json = t.frame().to_json().unwrap();
        assert!(json.contains(r#""type":"tenant_register""#), "{json}");
        assert!(!json.contains("tier"), "{json}");
        let ack = Frame::from_json(r#"{"type":"register_ack","id":"x"}"#).unwrap();
        assert_eq!(ack, Frame::RegisterAck(RegisterAck { id: "x".into() }));

        assert!(matches!(
            Registration::tenant("Not_A_Label", 1, true, "", "").validate(),
            Err(RegistrationError::BadTenant(_))
        ));
        assert!(matches!(
            Registration::tenant("acme", -1, true, "", "").validate(),
            Err(RegistrationError::BadGeneration(-1))
        ));
        let many: Vec<String> = (0..40).map(|i| format!("c{i}")).collect();
        assert!(matches!(
            Registration::support("acme", 1, Some("gold"), &many).validate(),
            Err(RegistrationError::TooManyContacts(40))
        ));
        let long = "x".repeat(300);
        assert!(matches!(
            Registration::support("acme", 1, Some(&long), &[]).validate(),
            Err(RegistrationError::TooLong { field: "lane", .. })
        ));
        assert!(matches!(
            Registration::support("acme", 1, Some(""), &[]).validate(),
            Err(RegistrationError::Empty("lane"))
        ));
    }
}
