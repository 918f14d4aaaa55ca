//! The waves picture during a three-wave rollout.

use super::*;

// ------------------------------------------------------------------ waves

/// `(wave, tenants)` of the example fleet, in wave order.
fn waves(prefix: &str) -> Vec<(&'static str, Vec<String>)> {
    vec![
        ("canary", vec![format!("{prefix}-platform")]),
        ("low-risk", vec![format!("{prefix}-acme")]),
        (
            "fleet",
            ["globex", "initech", "umbrella"]
                .iter()
                .map(|t| format!("{prefix}-{t}"))
                .collect(),
        ),
    ]
}

/// Whether every tenant row of `wave` shows `release`, current (not
/// stale), with every step done.
const WAVE_DONE: &str = "const [wave, tenants, release] = arguments;
    const sec = document.querySelector(`section.wave[data-wave=\"${wave}\"]`);
    if (!sec) return false;
    return tenants.every(t => {
      const tr = sec.querySelector(`tr.tenant[data-tenant=\"${t}\"]`);
      if (!tr || tr.dataset.stale === 'true') return false;
      const rel = tr.querySelector('.release');
      const steps = tr.querySelectorAll('td.step');
      return rel && rel.textContent.trim() === release && steps.length > 0
        && Array.from(steps).every(s => s.dataset.state === 'done');
    });";

/// Whether a tenant row of `wave` is on `release` with a step not done
/// yet, or every row is done there.
const WAVE_MOVING: &str = "const [wave, tenants, release] = arguments;
    const sec = document.querySelector(`section.wave[data-wave=\"${wave}\"]`);
    if (!sec) return false;
    const rows = tenants.map(t => sec.querySelector(`tr.tenant[data-tenant=\"${t}\"]`));
    const on = rows.filter(tr => tr && tr.querySelector('.release')
      && tr.querySelector('.release').textContent.trim() === release);
    const moving = on.some(tr => Array.from(tr.querySelectorAll('td.step'))
      .some(s => s.dataset.state !== 'done'));
    return moving || on.length === tenants.length;";

/// Records every state a step cell takes, with its colour then: the
/// computed background of the cell or, when that is transparent, of the
/// first element inside it that has one (the contract names the cell, the
/// page may paint a chip in it).
const RECORD_STEPS: &str = "window.__exoSeen = [];
    const colourOf = td => {
      for (const e of [td, ...td.querySelectorAll('*')]) {
        const c = getComputedStyle(e).backgroundColor;
        if (c && c !== 'transparent' && c !== 'rgba(0, 0, 0, 0)') return c;
      }
      return 'none';
    };
    const rec = td => {
      const tr = td.closest('tr.tenant');
      const rel = tr && tr.querySelector('.release');
      window.__exoSeen.push([tr ? tr.dataset.tenant : null, td.dataset.step, td.dataset.state,
        rel ? rel.textContent.trim() : null, colourOf(td)]);
    };
    document.querySelectorAll('td.step').forEach(rec);
    new MutationObserver(ms => {
      for (const m of ms) {
        if (m.type === 'attributes' && m.target.matches('td.step')) rec(m.target);
        for (const n of m.addedNodes) {
          if (n.nodeType !== 1) continue;
          if (n.matches('td.step')) rec(n);
          n.querySelectorAll('td.step').forEach(rec);
        }
      }
    }).observe(document.body, {subtree: true, childList: true, attributes: true,
                               attributeFilter: ['data-state']});
    return true;";

/// Whether a computed colour belongs to a step state's family (the
/// contract names families: done green, running blue, pending grey,
/// waiting amber, failed red).
fn colour_fits(state: &str, css: &str) -> bool {
    let Some((r, g, b)) = channels(css) else {
        return false;
    };
    let (r, g, b) = (i32::from(r), i32::from(g), i32::from(b));
    match state {
        "done" => g > r && g > b,
        "running" => b > r && b >= g,
        "pending" => (r.max(g).max(b) - r.min(g).min(b)) < 40,
        "waiting" => r >= g && g > b + 30 && r > b + 60,
        "failed" => r > 2 * g && r > 2 * b,
        _ => false,
    }
}

#[tokio::test]
async fn the_waves_page_follows_a_three_wave_rollout_step_by_step() {
    let _cluster = CLUSTER.write().await;
    // Tenant namespaces are named after the prefix; a unique one keeps a
    // rerun clear of the last run's namespaces while they terminate.
    let prefix = format!("dw{}", support::unique_suffix());
    let fx = Fixture::new(&prefix, example_files(&prefix)).await;
    let cp = ControlPlane::start(&[]);
    let token = cp.create_deployment("fleet");
    let admin = admin_token(&cp);
    let op = Operator::start_env(
        &fx.ns.name,
        &support::env().kubeconfig,
        "a",
        &[],
        &[
            ("AUTONOMIC_MANAGED", "true"),
            ("AUTONOMIC_BASE_URL", &cp.base),
            ("AUTONOMIC_AUTH_TOKEN", &token),
        ],
    );
    fx.wait_all(OLD, &op).await;

    let s = Session::open(&cp.base).await;
    log_in(&s, &admin).await;
    s.goto("/deployments/fleet/waves").await;
    s.wait_for(r#"body[data-page="waves"]"#).await;
    let plan = waves(&prefix);
    for (wave, tenants) in &plan {
        s.wait_js(
            &format!("wave {wave} verified on {OLD}"),
            Duration::from_secs(60),
            WAVE_DONE,
            vec![json!(wave), json!(tenants), json!(OLD)],
        )
        .await;
    }
    let order = s
        .js(
            "return Array.from(document.querySelectorAll('section.wave')).map(s => s.dataset.wave);",
            vec![],
        )
        .await;
    assert_eq!(order, json!(["canary", "low-risk", "fleet"]), "wave order");
    for (_, tenants) in &plan {
        for t in tenants {
            for col in [".commit", ".verified-at"] {
                s.wait_for(&format!(r#"tr.tenant[data-tenant="{t}"] {col}"#))
                    .await;
            }
        }
    }
    s.js(RECORD_STEPS, vec![]).await;

    // The rollout, driven like a user does, while the page watches.
    let root = fx.root();
    let kubeconfig = support::env().kubeconfig.clone();
    let rollout = tokio::task::spawn_blocking(move || {
        std::process::Command::new(support::fleet::EXO)
            .args(["release", "rollout", NEW, "--timeout", "3m"])
            .current_dir(root)
            .env("KUBECONFIG", kubeconfig)
            .output()
            .expect("run exo release rollout")
    });
    for (wave, tenants) in &plan {
        if *wave == "fleet" {
            // The picture mid-flight (README): the fleet wave on its way,
            // or done already when it was quicker than the page's wait.
            s.wait_js(
                "the fleet wave moving",
                Duration::from_secs(180),
                WAVE_MOVING,
                vec![json!(wave), json!(tenants), json!(NEW)],
            )
            .await;
            let shot = s.screenshot("waves-progress").await;
            println!("wave {wave} in progress: {}", shot.display());
        }
        s.wait_js(
            &format!("wave {wave} verified on {NEW}"),
            Duration::from_secs(180),
            WAVE_DONE,
            vec![json!(wave), json!(tenants), json!(NEW)],
        )
        .await;
        let shot = s.screenshot(&format!("waves-{wave}")).await;
        println!("wave {wave} verified on {NEW}: {}", shot.display());
    }
    let o = rollout.await.unwrap();
    let text = support::fleet::out(&o);
    assert_eq!(o.status.code(), Some(0), "{text}\n{}", tail(&op.log()));
    for (_, tenants) in &plan {
        for t in tenants {
            fx.wait_phase(t, NEW, RolloutPhase::Verified, &op).await;
        }
    }

    // Every state a step took on the page was shown in its colour, and the
    // page showed the saga advance (steps not yet done on the new release).
    let seen = s.js("return window.__exoSeen;", vec![]).await;
    let seen = seen.as_array().expect("recorded steps");
    let mut states = std::collections::BTreeMap::<String, String>::new();
    for rec in seen {
        let (state, colour) = (rec[2].as_str().unwrap_or(""), rec[4].as_str().unwrap_or(""));
        assert!(
            colour_fits(state, colour),
            "step {} of {} shown {state} in {colour}",
            rec[1],
            rec[0]
        );
        states.entry(state.to_owned()).or_insert(colour.to_owned());
    }
    println!("step states seen with their colours: {states:?}");
    for (_, tenants) in &plan {
        for t in tenants {
            assert!(
                seen.iter()
                    .any(|r| r[0] == json!(t) && r[3] == json!(NEW) && r[2] != json!("done")),
                "the page never showed {t}'s saga on {NEW} before it was done"
            );
        }
    }
    s.close().await;
}
