//! An author's aggregated server behind the front door: the wardle sample
//! (kube's sample-apiserver on kubechain-apiserver), started beside a
//! cluster the bench started, as a ServiceAccount, with a certificate it
//! makes itself, storing Flunders in the cluster's etcd and registered as
//! `kubechain register` would. Flunders are created and read through the
//! front door and the aggregator's proxy, and read directly as the proxy
//! sends its requests: the CPU each process spends per operation. Then a
//! ServiceAccount reads them, and the front door counts the
//! SubjectAccessReviews the server asked for: how many requests share one.

use std::path::Path;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use reqwest::{Method, StatusCode};
use serde_json::json;

use super::load::closed_loop;
use super::report::{CpuTable, Table};
use super::target::Target;
use super::{
    create_namespace, create_service_account, front_proxy_client, identity_headers, phase, token_of,
};
use crate::client::{self, Api};
use crate::register::{Registration, ensure, subject};

const GROUP_VERSION: &str = "wardle.example.com/v1beta1";
/// Where the server keeps its certificate, in the cluster's directory.
const CERT_DIR: &str = "wardle-certs";

/// The wardle server the bench started.
pub struct Wardle {
    /// A client of it as the aggregator's proxy is one.
    direct: client::Credentials,
}

/// The phases measured, with their operation counts (for the CPU per
/// operation table).
pub type Phases = Vec<(&'static str, u64)>;

/// Starts and registers the wardle server on a cluster the bench started;
/// `None` for `--target` or without the program.
pub async fn start(target: &mut Target, admin: &Api) -> Result<Option<Wardle>> {
    let (Some(dir), Some(_)) = (target.dir(), target.logs()) else {
        return Ok(None);
    };
    create_namespace(admin, "wardle").await?;
    create_service_account(admin, "wardle", "apiserver").await?;
    let token = token_of(admin, "wardle", "apiserver").await?;
    let kubeconfig = dir.join("wardle.kubeconfig");
    let config = json!({
        "apiVersion": "v1", "kind": "Config",
        "clusters": [{"name": "kubechain", "cluster": {
            "server": target.credentials.server,
            "certificate-authority": dir.join("pki/ca.crt"),
        }}],
        "users": [{"name": "wardle", "user": {"token": token}}],
        "contexts": [{"name": "wardle", "context": {"cluster": "kubechain", "user": "wardle"}}],
        "current-context": "wardle",
    });
    std::fs::write(&kubeconfig, config.to_string())?;
    let port = std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port();
    let pki = dir.join("pki");
    let path = |p: &Path| p.display().to_string();
    let args = vec![
        "--listen".into(),
        format!("127.0.0.1:{port}"),
        "--kubeconfig".into(),
        path(&kubeconfig),
        "--cert-dir".into(),
        path(&dir.join(CERT_DIR)),
        // The name the front door verifies: its Service's.
        "--tls-san".into(),
        "wardle-server.wardle.svc".into(),
        "--etcd-servers".into(),
        target.etcd.clone(),
        "--etcd-certfile".into(),
        path(&pki.join("etcd.crt")),
        "--etcd-keyfile".into(),
        path(&pki.join("etcd.key")),
        "--etcd-cafile".into(),
        path(&pki.join("internal-ca.crt")),
    ];
    if !target.start_aggregated(args)? {
        return Ok(None);
    }
    let ca_file = dir.join(CERT_DIR).join("ca.crt");
    wait("its certificate", || async { ca_file.exists() }).await?;
    let ca = std::fs::read(&ca_file)?;
    let registration = Registration {
        group: "wardle.example.com".into(),
        versions: vec!["v1alpha1".into(), "v1beta1".into()],
        service: ("wardle".into(), "wardle-server".into()),
        service_port: 443,
        addresses: vec![([127, 0, 0, 1], port).into()],
        ca: ca.clone(),
        subject: subject("serviceaccount:wardle:apiserver")?,
        group_priority_minimum: 1000,
        version_priority: 15,
    };
    for (collection, object) in registration.objects()? {
        ensure(admin, &collection, &object)
            .await
            .with_context(|| format!("registering {collection}"))?;
    }
    let probe = format!("/apis/{GROUP_VERSION}/namespaces/wardle/flunders");
    let last = std::sync::Mutex::new(String::new());
    wait("wardle.example.com through the front door", || async {
        let answer = admin.call(Method::GET, &probe, None, StatusCode::OK).await;
        if let Err(e) = &answer {
            *last.lock().unwrap_or_else(|e| e.into_inner()) = format!("{e:#}");
        }
        answer.is_ok()
    })
    .await
    .with_context(|| format!("last: {}", last.lock().unwrap_or_else(|e| e.into_inner())))?;
    let direct = front_proxy_client(&dir, &format!("https://127.0.0.1:{port}"), ca)?;
    Ok(Some(Wardle { direct }))
}

/// Measures Flunder creates and GETs through the proxy and directly, in
/// `namespace`, and how many of `reader`'s GETs share a review.
#[allow(clippy::too_many_arguments)]
pub async fn measure(
    wardle: &Wardle,
    admin: &Api,
    apis: &[Api],
    reader: &Api,
    namespace: &str,
    length: Duration,
    cpu: &mut CpuTable,
    table: &mut Table,
    errors: &mut Vec<String>,
) -> Result<Phases> {
    let seconds = length.as_secs_f64();
    let collection = format!("/apis/{GROUP_VERSION}/namespaces/{namespace}/flunders");
    admin
        .call(
            Method::POST,
            &collection,
            Some(flunder("probe").into()),
            StatusCode::CREATED,
        )
        .await
        .context("creating a Flunder")?;
    let path = collection.clone();
    let creates = phase(
        cpu,
        "Flunder creates, proxied",
        seconds,
        closed_loop(apis.to_vec(), length, move |api: Api, i| {
            let path = path.clone();
            async move {
                api.call(
                    Method::POST,
                    &path,
                    Some(flunder(&format!("flunder-{i}")).into()),
                    StatusCode::CREATED,
                )
                .await
                .map(drop)
            }
        }),
    )
    .await;
    let probe = format!("{collection}/probe");
    let get = {
        let probe = probe.clone();
        move |api: Api, _| {
            let probe = probe.clone();
            async move {
                api.call(Method::GET, &probe, None, StatusCode::OK)
                    .await
                    .map(drop)
            }
        }
    };
    let proxied = phase(
        cpu,
        "Flunder GETs, proxied",
        seconds,
        closed_loop(apis.to_vec(), length, get.clone()),
    )
    .await;
    let directs = (0..apis.len())
        .map(|_| wardle.direct.api_with_headers(identity_headers()))
        .collect::<Result<Vec<_>>>()?;
    let direct = phase(
        cpu,
        "Flunder GETs, direct",
        seconds,
        closed_loop(directs, length, get.clone()),
    )
    .await;
    table.note(
        "aggregated API creates/s (wardle Flunder, etcd)",
        &format!("{:.0}", creates.per_second()),
    );
    table.proxy("aggregated API GET/s (wardle Flunder)", &direct, &proxied);

    // One ServiceAccount's GETs, and the reviews the server asked for.
    let role = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
        "metadata": {"name": "bench-flunder-reader"},
        "rules": [{"apiGroups": ["wardle.example.com"], "resources": ["flunders"], "verbs": ["get"]}]});
    let binding = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
        "metadata": {"name": "bench-flunder-reader"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "bench-flunder-reader"},
        "subjects": [{"kind": "ServiceAccount", "name": "bench-reader", "namespace": namespace}]});
    let rbac = format!("/apis/rbac.authorization.k8s.io/v1/namespaces/{namespace}");
    for (kind, object) in [("roles", role), ("rolebindings", binding)] {
        admin
            .call(
                Method::POST,
                &format!("{rbac}/{kind}"),
                Some(object.to_string().into()),
                StatusCode::CREATED,
            )
            .await?;
    }
    // Counted from the first request: its answers are the ones remembered.
    let before = reviews(admin).await?;
    let probes = std::sync::atomic::AtomicU64::new(0);
    wait("the ServiceAccount's first Flunder", || async {
        probes.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        reader
            .call(Method::GET, &probe, None, StatusCode::OK)
            .await
            .is_ok()
    })
    .await?;
    let readers = vec![reader.clone(); apis.len()];
    let shared = phase(
        cpu,
        "Flunder GETs, a ServiceAccount",
        seconds,
        closed_loop(readers, length, get),
    )
    .await;
    let reviewed = reviews(admin).await? - before;
    table.note(
        "requests per SubjectAccessReview (wardle, one ServiceAccount)",
        &format!(
            "{} GETs: {reviewed:.0} SubjectAccessReviews",
            shared.ops + probes.into_inner()
        ),
    );
    for (what, result) in [
        ("Flunder creates", &creates),
        ("proxied Flunder GETs", &proxied),
        ("direct Flunder GETs", &direct),
        ("a ServiceAccount's Flunder GETs", &shared),
    ] {
        result.report_failures(what, errors);
    }
    Ok(vec![
        ("Flunder creates, proxied", creates.ops),
        ("Flunder GETs, proxied", proxied.ops),
        ("Flunder GETs, direct", direct.ops),
        ("Flunder GETs, a ServiceAccount", shared.ops),
    ])
}

/// A Flunder named `name`.
fn flunder(name: &str) -> String {
    json!({"apiVersion": GROUP_VERSION, "kind": "Flunder", "metadata": {"name": name},
           "spec": {"flunderReference": "other", "referenceType": "Flunder"}})
    .to_string()
}

/// The SubjectAccessReviews the front door has answered.
async fn reviews(admin: &Api) -> Result<f64> {
    let text = admin
        .call(Method::GET, "/metrics", None, StatusCode::OK)
        .await?;
    let text = String::from_utf8_lossy(&text);
    Ok(text
        .lines()
        .filter(|l| l.starts_with("apiserver_request_total{"))
        .filter(|l| l.contains("resource=\"subjectaccessreviews\""))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum())
}

/// Waits up to 60 s for `done`.
async fn wait<F, Fut>(what: &str, done: F) -> Result<()>
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while !done().await {
        if std::time::Instant::now() > deadline {
            bail!("waited 60 s for {what}");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    Ok(())
}
