//! The pure steps of the App pipeline: plan each volume (the AgentFS size
//! rules, and whether its PVC must be written), build the desired pod once
//! every volume exists, and compute the status. No client here.

use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::jiff::Timestamp;

use crate::cluster::build::app::{app_pod, app_pvc, app_pvc_name};
use crate::cluster::build::{Owner, hash_of};
use crate::cluster::conditions::{Cond, merge};
use crate::cluster::error::Result;
use crate::cluster::fs::{SizeRefusal, capacities, phase, plan_size};
use crate::crd::{
    AgentFSPhase, App, AppPhase, AppSpec, AppStatus, AppVolume, AppVolumeKind, AppVolumeStatus,
};
use crate::operator::phase::PodState;

/// What to do with one volume's PVC.
#[derive(Debug, Clone)]
pub struct VolumePlan {
    pub kind: AppVolumeKind,
    pub pvc_name: String,
    /// The size the PVC gets: the spec's, or its present one when the
    /// spec's is refused.
    pub size: String,
    pub refusal: Option<SizeRefusal>,
    /// The PVC to apply; `None` when the live one is already it, or when
    /// there is none and the size is refused (nothing is provisioned
    /// above `maxSize`).
    pub write: Option<PersistentVolumeClaim>,
}

/// Plans one volume against its live PVC: grow-only, capped at
/// `maxSize`, owned by the App unless `retain`.
pub fn volume(
    owner: &Owner,
    kind: AppVolumeKind,
    vol: &AppVolume,
    retain: bool,
    live: Option<&PersistentVolumeClaim>,
) -> Result<VolumePlan> {
    let (current, _) = live.map(capacities).unwrap_or_default();
    let plan = plan_size(&vol.size.0, &vol.max_size.0, current.as_deref());
    let refused_new = plan.refusal.is_some() && live.is_none();
    let write = if refused_new {
        None
    } else {
        let desired = app_pvc(owner, kind, &plan.size, retain)?;
        let same = live.is_some_and(|l| {
            hash_of(&l.metadata).is_some() && hash_of(&l.metadata) == hash_of(&desired.metadata)
        });
        (!same).then_some(desired)
    };
    Ok(VolumePlan {
        kind,
        pvc_name: app_pvc_name(&owner.name, kind),
        size: plan.size,
        refusal: plan.refusal,
        write,
    })
}

/// A volume after its plan was carried out: the PVC as it is now.
#[derive(Debug, Clone)]
pub struct Outcome {
    pub kind: AppVolumeKind,
    pub pvc_name: String,
    pub refusal: Option<SizeRefusal>,
    pub pvc: Option<PersistentVolumeClaim>,
}

impl Outcome {
    /// The size was refused and there is no PVC to fall back on.
    fn failed(&self) -> bool {
        self.refusal.is_some() && self.pvc.is_none()
    }

    fn status(&self) -> AppVolumeStatus {
        let (requested, provisioned) = self.pvc.as_ref().map(capacities).unwrap_or_default();
        AppVolumeStatus {
            phase: Some(phase(self.pvc.as_ref(), false, self.failed())),
            pvc_name: self.pvc.as_ref().map(|_| self.pvc_name.clone()),
            requested: requested.map(Quantity),
            provisioned: provisioned.map(Quantity),
        }
    }
}

/// The refusal message naming the spec field it is about.
fn refusal_message(kind: AppVolumeKind, r: &SizeRefusal) -> String {
    let field = kind.size_field();
    match r {
        SizeRefusal::Shrink { requested, current } => format!(
            "{field} {requested} is smaller than the current {current}: resize is grow-only; the PVC keeps {current}"
        ),
        SizeRefusal::AboveMax { requested, max } => {
            format!("{field} {requested} exceeds its maxSize {max}; the PVC is left as it is")
        }
        SizeRefusal::Unparsable(q) => format!("{field}: {q:?} is not a valid quantity"),
    }
}

/// The first refused volume, with the message for it.
pub fn first_refusal(outcomes: &[Outcome]) -> Option<(&SizeRefusal, String)> {
    outcomes.iter().find_map(|o| {
        Some((
            o.refusal.as_ref()?,
            refusal_message(o.kind, o.refusal.as_ref()?),
        ))
    })
}

/// The pod to run, once every volume it mounts exists (a volume refused
/// before it was ever made leaves the app without a pod).
pub fn pod(owner: &Owner, spec: &AppSpec, outcomes: &[Outcome]) -> Result<Option<Pod>> {
    if outcomes.iter().any(Outcome::failed) {
        return Ok(None);
    }
    app_pod(owner, spec).map(Some)
}

/// The App's phase and its `Ready` condition's reason and message.
pub fn report(outcomes: &[Outcome], pod: &PodState) -> (AppPhase, &'static str, String) {
    if let Some(o) = outcomes.iter().find(|o| o.failed()) {
        let msg = o
            .refusal
            .as_ref()
            .map(|r| refusal_message(o.kind, r))
            .unwrap_or_default();
        return (AppPhase::Error, "VolumeRefused", msg);
    }
    if let Some(o) = outcomes
        .iter()
        .find(|o| phase(o.pvc.as_ref(), false, false) == AgentFSPhase::Pending)
    {
        return (
            AppPhase::Pending,
            "VolumePending",
            format!("PVC {} is not bound yet", o.pvc_name),
        );
    }
    match pod {
        PodState::Running { ready: true } => (
            AppPhase::Running,
            "Running",
            "the app pod is running and ready".to_owned(),
        ),
        PodState::Broken { reason } => (AppPhase::Error, "PodError", reason.clone()),
        PodState::Failed { reason } => (
            AppPhase::Error,
            "PodFailed",
            format!("the app pod failed ({reason}); it is being recreated"),
        ),
        PodState::Deleting => (
            AppPhase::Pending,
            "PodRolling",
            "the previous pod is being replaced".to_owned(),
        ),
        _ => (
            AppPhase::Pending,
            "PodStarting",
            "the app pod is starting".to_owned(),
        ),
    }
}

/// The status for this reconcile, stamped with the generation it was
/// computed for.
pub fn status(
    app: &App,
    outcomes: &[Outcome],
    pod: &PodState,
    pod_name: Option<String>,
    now: Timestamp,
) -> AppStatus {
    let old = app.status.clone().unwrap_or_default();
    let generation = app.metadata.generation;
    let (phase, reason, message) = report(outcomes, pod);
    let resizable = match first_refusal(outcomes) {
        None => Cond::new(
            "Resizable",
            true,
            "SizeAccepted",
            "every volume has the size its spec asks for",
        ),
        Some((r, msg)) => Cond::new("Resizable", false, r.reason(), msg),
    };
    let of = |kind| {
        outcomes
            .iter()
            .find(|o| o.kind == kind)
            .map(Outcome::status)
    };
    AppStatus {
        phase: Some(phase),
        observed_generation: generation,
        conditions: merge(
            &old.conditions,
            &[
                Cond::new("Ready", phase == AppPhase::Running, reason, message.clone()),
                resizable,
            ],
            generation,
            now,
        ),
        pod_name,
        workspace: of(AppVolumeKind::Workspace),
        database: of(AppVolumeKind::Database),
        message: Some(message),
        // Left out of this apply: the backup task merges it.
        backup: None,
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::crd::{AppDatabase, AppPostgres};

    fn app(workspace: (&str, &str), database: Option<(&str, &str)>, retain: bool) -> App {
        let q = |s: &str| Quantity(s.to_owned());
        let mut a = App::new(
            "shop",
            AppSpec {
                image: "reg/shop:1".into(),
                workspace: AppVolume {
                    size: q(workspace.0),
                    max_size: q(workspace.1),
                },
                database: database.map(|(size, max)| AppDatabase {
                    postgres: AppPostgres {
                        image: "reg/postgres:16".into(),
                        size: q(size),
                        max_size: q(max),
                        backup_hook: None,
                    },
                }),
                retain,
                ..AppSpec::default()
            },
        );
        a.metadata.namespace = Some("team".into());
        a.metadata.uid = Some("uid-app".into());
        a.metadata.generation = Some(3);
        a
    }

    fn bound(mut pvc: PersistentVolumeClaim, provisioned: &str) -> PersistentVolumeClaim {
        pvc.status = Some(k8s_openapi::api::core::v1::PersistentVolumeClaimStatus {
            phase: Some("Bound".into()),
            capacity: Some(BTreeMap::from([(
                "storage".to_owned(),
                Quantity(provisioned.to_owned()),
            )])),
            ..Default::default()
        });
        pvc
    }

    fn plans(a: &App, live: &[Option<PersistentVolumeClaim>]) -> Vec<VolumePlan> {
        let owner = Owner::of(a).unwrap();
        a.spec
            .volumes()
            .into_iter()
            .zip(live)
            .map(|((kind, vol), l)| volume(&owner, kind, &vol, a.spec.retain, l.as_ref()).unwrap())
            .collect()
    }

    #[test]
    fn new_volumes_are_written_then_left_alone() {
        let a = app(("1Gi", "5Gi"), Some(("2Gi", "10Gi")), false);
        let first = plans(&a, &[None, None]);
        let names: Vec<_> = first.iter().map(|p| p.pvc_name.as_str()).collect();
        assert_eq!(names, ["app-workspace-shop", "app-database-shop"]);
        assert!(
            first
                .iter()
                .all(|p| p.write.is_some() && p.refusal.is_none())
        );
        // The applied PVCs come back: nothing more to write.
        let live: Vec<_> = first
            .iter()
            .map(|p| p.write.clone().map(|w| bound(w, &p.size)))
            .collect();
        assert!(plans(&a, &live).iter().all(|p| p.write.is_none()));
    }

    #[test]
    fn sizes_grow_only_and_stay_under_max() {
        let owner = Owner::of(&app(("1Gi", "5Gi"), None, false)).unwrap();
        let live = |size: &str| {
            bound(
                app_pvc(&owner, AppVolumeKind::Workspace, size, false).unwrap(),
                size,
            )
        };
        // (spec size, live size, size applied, written, refusal)
        type Case<'a> = (&'a str, &'a str, &'a str, bool, Option<&'a str>);
        let cases: &[Case] = &[
            ("2Gi", "1Gi", "2Gi", true, None),
            ("1Gi", "2Gi", "2Gi", false, Some("ShrinkRefused")),
            ("6Gi", "1Gi", "1Gi", false, Some("AboveMaxSize")),
            ("1024Mi", "1Gi", "1Gi", false, None),
        ];
        for (spec, current, want, written, refusal) in cases {
            let a = app((spec, "5Gi"), None, false);
            let p = &plans(&a, &[Some(live(current))])[0];
            assert_eq!(p.size, *want, "{spec} over {current}");
            assert_eq!(p.write.is_some(), *written, "{spec} over {current}");
            assert_eq!(p.refusal.as_ref().map(SizeRefusal::reason), *refusal);
        }
    }

    #[test]
    fn a_size_above_max_with_no_pvc_makes_nothing_and_no_pod() {
        let a = app(("6Gi", "5Gi"), None, false);
        let p = plans(&a, &[None]).remove(0);
        assert!(p.write.is_none());
        let outcomes = [Outcome {
            kind: p.kind,
            pvc_name: p.pvc_name,
            refusal: p.refusal,
            pvc: None,
        }];
        let owner = Owner::of(&a).unwrap();
        assert!(pod(&owner, &a.spec, &outcomes).unwrap().is_none());
        let (phase, reason, msg) = report(&outcomes, &PodState::Missing);
        assert_eq!((phase, reason), (AppPhase::Error, "VolumeRefused"));
        assert_eq!(
            msg,
            "spec.workspace.size 6Gi exceeds its maxSize 5Gi; the PVC is left as it is"
        );
    }

    #[test]
    fn turning_retain_on_rewrites_the_pvcs_without_their_owner() {
        let owned = app(("1Gi", "5Gi"), None, false);
        let live: Vec<_> = plans(&owned, &[None])
            .into_iter()
            .map(|p| p.write.map(|w| bound(w, "1Gi")))
            .collect();
        let kept = app(("1Gi", "5Gi"), None, true);
        let p = plans(&kept, &live).remove(0);
        let w = p.write.expect("retain flipped: the PVC is written again");
        assert!(w.metadata.owner_references.is_none());
    }

    #[test]
    fn status_names_the_refused_field_and_the_generation() {
        let a = app(("1Gi", "5Gi"), Some(("1Gi", "10Gi")), false);
        let owner = Owner::of(&a).unwrap();
        let pvc = |kind, size: &str| Some(bound(app_pvc(&owner, kind, size, false).unwrap(), size));
        let outcomes = [
            Outcome {
                kind: AppVolumeKind::Workspace,
                pvc_name: "app-workspace-shop".into(),
                refusal: None,
                pvc: pvc(AppVolumeKind::Workspace, "1Gi"),
            },
            Outcome {
                kind: AppVolumeKind::Database,
                pvc_name: "app-database-shop".into(),
                refusal: Some(SizeRefusal::Shrink {
                    requested: "1Gi".into(),
                    current: "2Gi".into(),
                }),
                pvc: pvc(AppVolumeKind::Database, "2Gi"),
            },
        ];
        let st = status(
            &a,
            &outcomes,
            &PodState::Running { ready: true },
            Some("app-shop-12345678".into()),
            Timestamp::UNIX_EPOCH,
        );
        assert_eq!(st.observed_generation, Some(3));
        // A refused grow leaves the app running on the size it has.
        assert_eq!(st.phase, Some(AppPhase::Running));
        let resizable = st
            .conditions
            .iter()
            .find(|c| c.type_ == "Resizable")
            .unwrap();
        assert_eq!(
            (resizable.status.as_str(), resizable.reason.as_str()),
            ("False", "ShrinkRefused")
        );
        assert!(
            resizable
                .message
                .starts_with("spec.database.postgres.size 1Gi is smaller than the current 2Gi"),
            "{}",
            resizable.message
        );
        let db = st.database.unwrap();
        assert_eq!(db.pvc_name.as_deref(), Some("app-database-shop"));
        assert_eq!(db.requested, Some(Quantity("2Gi".into())));
        assert_eq!(db.phase, Some(AgentFSPhase::Bound));
    }

    #[test]
    fn unbound_volumes_keep_the_app_pending() {
        let a = app(("1Gi", "5Gi"), None, false);
        let owner = Owner::of(&a).unwrap();
        let outcomes = [Outcome {
            kind: AppVolumeKind::Workspace,
            pvc_name: "app-workspace-shop".into(),
            refusal: None,
            pvc: Some(app_pvc(&owner, AppVolumeKind::Workspace, "1Gi", false).unwrap()),
        }];
        let (phase, reason, _) = report(&outcomes, &PodState::Running { ready: true });
        assert_eq!((phase, reason), (AppPhase::Pending, "VolumePending"));
    }
}
