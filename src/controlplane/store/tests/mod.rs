//! The store's behaviour, on SQLite and on PostgreSQL alike.

mod active;
mod alerts;
mod fleet;
mod lanes;
mod tenants;

use std::time::Duration;

use super::*;
use crate::controlplane::model::NewAudit;
use crate::controlplane::test_store::backends;

#[tokio::test]
async fn tokens_are_stored_hashed_and_authenticate() {
    for b in backends().await {
        let s = b.store();
        let (info, tok) = s.create_deployment("prod-eu").await.unwrap();
        let auth = s.authenticate(&tok).await.unwrap().unwrap();
        assert_eq!(auth.deployment, "prod-eu", "{b}");
        assert_eq!(auth.token_id, info.id, "{b}");
        assert!(s.token_valid(&info.id).await.unwrap(), "{b}");
        assert!(s.valid_token_ids().await.unwrap().contains(&info.id), "{b}");
        assert!(
            s.authenticate(&SecretToken::new("exo_dt_wrong"))
                .await
                .unwrap()
                .is_none(),
            "{b}"
        );
    }
}

/// SQLite only: the file and its WAL hold no token clear text (the
/// PostgreSQL check is `pg::tokens`').
#[tokio::test]
async fn the_sqlite_file_never_holds_a_token() {
    let dir = tempfile::tempdir().unwrap();
    let s = Store::open(&dir.path().join("cp.sqlite")).unwrap();
    let (_, tok) = s.create_deployment("prod-eu").await.unwrap();
    let (_, rotated) = s.rotate("prod-eu", Duration::ZERO).await.unwrap();
    drop(s);
    let raw = std::fs::read(dir.path().join("cp.sqlite")).unwrap();
    let wal = std::fs::read(dir.path().join("cp.sqlite-wal")).unwrap_or_default();
    for needle in [tok.expose().as_bytes(), rotated.expose().as_bytes()] {
        for bytes in [&raw, &wal] {
            assert!(!bytes.windows(needle.len()).any(|w| w == needle));
        }
    }
}

#[tokio::test]
async fn rotate_keeps_both_valid_during_overlap_then_revoke_ends_all() {
    for b in backends().await {
        let s = b.store();
        let (_, old) = s.create_deployment("a").await.unwrap();
        let (_, new) = s.rotate("a", Duration::from_secs(3600)).await.unwrap();
        assert!(s.authenticate(&old).await.unwrap().is_some(), "{b}");
        assert!(s.authenticate(&new).await.unwrap().is_some(), "{b}");
        let (newest_info, newest) = s.rotate("a", Duration::ZERO).await.unwrap();
        assert!(s.authenticate(&old).await.unwrap().is_none(), "{b}");
        assert!(s.authenticate(&new).await.unwrap().is_none(), "{b}");
        assert!(s.authenticate(&newest).await.unwrap().is_some(), "{b}");
        assert_eq!(
            s.valid_token_ids().await.unwrap(),
            [newest_info.id.clone()].into(),
            "{b}"
        );
        assert_eq!(s.revoke("a", None).await.unwrap(), 3, "{b}");
        assert!(s.authenticate(&newest).await.unwrap().is_none(), "{b}");
        assert!(!s.token_valid(&newest_info.id).await.unwrap(), "{b}");
        let listed = s.list_tokens("a").await.unwrap();
        assert_eq!(listed.len(), 3, "{b}");
        let order: Vec<_> = listed.iter().map(|t| (t.created_ms, &t.id)).collect();
        let mut want = order.clone();
        want.sort();
        assert_eq!(order, want, "{b}: oldest first, ties by id");
        assert!(listed.iter().all(|t| t.revoked_ms.is_some()), "{b}");
    }
}

#[tokio::test]
async fn revoking_one_token_by_id() {
    for b in backends().await {
        let s = b.store();
        let (first, first_tok) = s.create_deployment("a").await.unwrap();
        let (_, second_tok) = s.rotate("a", Duration::from_secs(3600)).await.unwrap();
        s.create_deployment("b").await.unwrap();
        assert_eq!(s.revoke("a", Some(&first.id)).await.unwrap(), 1, "{b}");
        assert_eq!(
            s.revoke("a", Some(&first.id)).await.unwrap(),
            0,
            "{b}: a revoked token is known, not revoked twice"
        );
        assert!(s.authenticate(&first_tok).await.unwrap().is_none(), "{b}");
        assert!(s.authenticate(&second_tok).await.unwrap().is_some(), "{b}");
        assert!(
            matches!(
                s.revoke("b", Some(&first.id)).await,
                Err(StoreError::NoToken(..))
            ),
            "{b}: another deployment's token"
        );
        assert!(
            matches!(
                s.revoke("nope", None).await,
                Err(StoreError::NoDeployment(_))
            ),
            "{b}"
        );
        assert!(
            matches!(
                s.list_tokens("nope").await,
                Err(StoreError::NoDeployment(_))
            ),
            "{b}"
        );
    }
}

#[tokio::test]
async fn names_are_checked_and_unique() {
    for b in backends().await {
        let s = b.store();
        assert!(
            matches!(
                s.create_deployment("Bad Name").await,
                Err(StoreError::BadName(_))
            ),
            "{b}"
        );
        s.create_deployment("x").await.unwrap();
        assert!(
            matches!(s.create_deployment("x").await, Err(StoreError::Exists(_))),
            "{b}"
        );
        assert!(
            matches!(
                s.rotate("nope", Duration::ZERO).await,
                Err(StoreError::NoDeployment(_))
            ),
            "{b}"
        );
        s.create_deployment("a-b").await.unwrap();
        s.create_deployment("ab").await.unwrap();
        let names: Vec<_> = s
            .list_deployments()
            .await
            .unwrap()
            .into_iter()
            .map(|d| d.name)
            .collect();
        // Byte order on both: '-' sorts before letters.
        assert_eq!(names, ["a-b", "ab", "x"], "{b}");
        assert!(s.deployment_exists("ab").await.unwrap(), "{b}");
        assert!(!s.deployment_exists("nope").await.unwrap(), "{b}");
    }
}

/// What N replicas do at once: one creation of a name wins, and
/// rotations of one deployment run one after the other.
#[tokio::test]
async fn concurrent_creations_and_rotations() {
    for b in backends().await {
        let s = b.store();
        let created = futures::future::join_all((0..4).map(|_| s.create_deployment("a"))).await;
        assert_eq!(created.iter().filter(|r| r.is_ok()).count(), 1, "{b}");
        for r in created.iter().filter(|r| r.is_err()) {
            assert!(matches!(r, Err(StoreError::Exists(_))), "{b}: {r:?}");
        }
        let rotated =
            futures::future::join_all((0..4).map(|_| s.rotate("a", Duration::ZERO))).await;
        assert!(rotated.iter().all(Result::is_ok), "{b}: {rotated:?}");
        assert_eq!(
            s.valid_token_ids().await.unwrap().len(),
            1,
            "{b}: each rotation ended the tokens before it"
        );
    }
}

#[tokio::test]
async fn audit_is_durable_and_ordered() {
    for b in backends().await {
        let s = b.store();
        s.create_deployment("a").await.unwrap();
        for action in ["connection.opened", "command.issued", "command.done"] {
            s.append_audit(&NewAudit {
                deployment: "a",
                source: "server",
                action,
                detail: (action == "command.done").then(|| serde_json::json!({"n": [1, "x"]})),
                ..NewAudit::default()
            })
            .await
            .unwrap();
        }
        let s = b.reopen().await;
        let rows = s.list_audit("a", 10).await.unwrap();
        let actions: Vec<_> = rows.iter().map(|r| r.action.as_str()).collect();
        assert_eq!(
            actions,
            ["connection.opened", "command.issued", "command.done"],
            "{b}"
        );
        assert_eq!(rows[0].detail, serde_json::Value::Null, "{b}");
        assert_eq!(rows[2].detail, serde_json::json!({"n": [1, "x"]}), "{b}");
        // Pages: the newest two, then the one before them.
        let newest = s.list_audit("a", 2).await.unwrap();
        assert_eq!(newest[0].action, "command.issued", "{b}");
        let older = s
            .list_audit_before("a", 2, Some(newest[0].id))
            .await
            .unwrap();
        let older: Vec<_> = older.iter().map(|r| r.action.as_str()).collect();
        assert_eq!(older, ["connection.opened"], "{b}");
        assert!(s.list_audit("nobody", 10).await.unwrap().is_empty(), "{b}");
    }
}
