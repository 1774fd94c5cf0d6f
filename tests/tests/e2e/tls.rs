//! TLS: the server serves rustls from PEM files; clients (tonic, `baton`, the health
//! check) connect over https:// trusting a custom CA, and nothing works without it.

use baton_proto::v1::ListMemoryRequest;
use baton_tests::tls::TestCa;
use baton_tests::{Backend, ClientEnv, Clients, Server, git_repo};
use tonic::transport::{Certificate, Channel, ClientTlsConfig};

use crate::{project, put_note, write};

async fn tls_channel(url: &str, ca: Option<&str>) -> Result<Channel, tonic::transport::Error> {
    let mut tls = ClientTlsConfig::new();
    if let Some(ca) = ca {
        tls = tls.ca_certificate(Certificate::from_pem(ca));
    }
    Channel::from_shared(url.to_owned()).unwrap().tls_config(tls)?.connect().await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grpc_over_tls_with_a_custom_ca() {
    let ca = TestCa::new().unwrap();
    let args = ca.server_args();
    let server = Server::start_with(Backend::Sqlite, &args.iter().map(String::as_str).collect::<Vec<_>>())
        .await
        .unwrap();
    assert!(server.log().contains("listening tls=true"), "{}", server.log());
    let https = format!("https://localhost:{}", server.addr.port());

    let mut c = Clients::new(tls_channel(&https, Some(&ca.ca_pem)).await.unwrap());
    let p = project();
    put_note(&mut c, &p, "k", "over TLS", write()).await.unwrap();
    let listed = c
        .memory
        .list_memory(ListMemoryRequest { project: p.clone(), ..Default::default() })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(listed.entries.len(), 1);

    // By IP address too: the certificate names 127.0.0.1.
    let by_ip = format!("https://127.0.0.1:{}", server.addr.port());
    let mut c = Clients::new(tls_channel(&by_ip, Some(&ca.ca_pem)).await.unwrap());
    put_note(&mut c, &p, "k2", "by ip", write()).await.unwrap();

    // Without the CA the certificate is not trusted: no call gets through.
    let untrusted = match tls_channel(&https, None).await {
        Err(e) => format!("{e:?}"),
        Ok(ch) => {
            let mut c = Clients::new(ch);
            format!("{:?}", put_note(&mut c, &p, "k3", "x", write()).await.unwrap_err())
        }
    };
    assert!(untrusted.contains("UnknownIssuer") || untrusted.contains("certificate"), "{untrusted}");

    // Plain HTTP/2 to a TLS port fails rather than talking in the clear.
    let plain = Channel::from_shared(format!("http://127.0.0.1:{}", server.addr.port())).unwrap();
    if let Ok(ch) = plain.connect().await {
        let mut c = Clients::new(ch);
        assert!(put_note(&mut c, &p, "k4", "clear", write()).await.is_err());
    }
    let mut c = Clients::new(tls_channel(&https, Some(&ca.ca_pem)).await.unwrap());
    let listed = c
        .memory
        .list_memory(ListMemoryRequest { project: p.clone(), ..Default::default() })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(listed.entries.len(), 2, "only the two trusted writes were stored");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn baton_and_healthcheck_over_https() {
    let ca = TestCa::new().unwrap();
    let args = ca.server_args();
    let server = Server::start_with(Backend::Sqlite, &args.iter().map(String::as_str).collect::<Vec<_>>())
        .await
        .unwrap();
    let https = format!("https://localhost:{}", server.addr.port());
    let repo = git_repo("git@github.com:acme/tls.git");
    let ca_path = ca.ca_path.display().to_string();

    let env = ClientEnv::new(&https);
    let out =
        env.run(repo.path(), &["--ca-cert", &ca_path, "memory", "add", "decision", "TLS everywhere"], "");
    assert_eq!(out.code, 0, "{out:?}");
    let out = env.run_with_env(repo.path(), &["memory", "list"], "", &[("BATON_CA_CERT", &ca_path)]);
    assert_eq!(out.code, 0, "{out:?}");
    assert!(out.stdout.contains("TLS everywhere"), "{out:?}");

    // From the config file, as a team member would set it up once.
    std::fs::create_dir_all(env.baton_home().join("config")).unwrap();
    std::fs::write(env.baton_home().join("config/config.toml"), format!("ca_cert = {ca_path:?}\n")).unwrap();
    let out = env.run(repo.path(), &["status"], "");
    assert_eq!(out.code, 0, "{out:?}");

    // Without the CA: a clear error naming the certificate problem, and a non-zero exit.
    let stranger = ClientEnv::new(&https);
    let out = stranger.run(repo.path(), &["memory", "list"], "");
    assert_ne!(out.code, 0, "{out:?}");
    assert!(out.stderr.contains("certificate") || out.stderr.contains("UnknownIssuer"), "{out:?}");
    let out = stranger.run(repo.path(), &["--ca-cert", "/nonexistent/ca.pem", "memory", "list"], "");
    assert!(out.stderr.contains("/nonexistent/ca.pem") && out.stderr.contains("--ca-cert"), "{out:?}");

    let health = std::process::Command::new(baton_tests::binary("baton-server"))
        .args(["healthcheck", "--url", &https, "--ca-cert", &ca_path])
        .output()
        .unwrap();
    assert!(health.status.success(), "{}", String::from_utf8_lossy(&health.stderr));
    assert_eq!(String::from_utf8_lossy(&health.stdout).trim(), "serving");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_tls_files_stop_the_server_with_the_reason() {
    let ca = TestCa::new().unwrap();
    let run = |cert: &str, key: &str| {
        std::process::Command::new(baton_tests::binary("baton-server"))
            .args(["--listen", "127.0.0.1:0", "--database-url"])
            .arg(format!("sqlite://{}", ca.dir.path().join("x.db").display()))
            .args(["--tls-cert", cert, "--tls-key", key])
            .output()
            .unwrap()
    };
    let (cert, key) = (ca.cert_path.display().to_string(), ca.key_path.display().to_string());
    let out = run("/nonexistent/cert.pem", &key);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("/nonexistent/cert.pem"), "{out:?}");
    let out = run(&key, &key);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("no PEM certificate"), "{out:?}");
    let out = run(&cert, &cert);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("no PEM private key"), "{out:?}");
    // One without the other is a usage error.
    let out = std::process::Command::new(baton_tests::binary("baton-server"))
        .args(["--tls-cert", &cert])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("--tls-key"), "{out:?}");
}

/// The web view over https: HTTP/2 (the only protocol the TLS listener offers), the sign-in
/// cookie `Secure` and bound to the host (`__Host-`). curl speaks to it as a browser would.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_web_view_over_https() {
    let ca = TestCa::new().unwrap();
    let args = ca.server_args();
    let server = Server::start_with(Backend::Sqlite, &args.iter().map(String::as_str).collect::<Vec<_>>())
        .await
        .unwrap();
    let url = format!("https://localhost:{}/signin", server.addr.port());
    let curl = |extra: &[&str]| {
        let out = std::process::Command::new("curl")
            .args(["-s", "-i", "--cacert"])
            .arg(&ca.ca_path)
            .args(extra)
            .arg(&url)
            .output()
            .expect("curl");
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let page = curl(&[]);
    assert!(page.starts_with("HTTP/2 200"), "{page}");
    assert!(page.contains("Sign in to Baton") && page.contains("content-security-policy"), "{page}");
    let origin = format!("origin: https://localhost:{}", server.addr.port());
    let signed_in = curl(&["-X", "POST", "-H", &origin, "-d", ""]);
    let cookie = signed_in.lines().find(|l| l.starts_with("set-cookie")).unwrap_or_default();
    assert!(cookie.contains("__Host-baton_web=") && cookie.contains("; Secure"), "{signed_in}");
    // And gRPC beside it on the same port, as before.
    let mut c = Clients::new(tls_channel(&url.replace("/signin", ""), Some(&ca.ca_pem)).await.unwrap());
    put_note(&mut c, &project(), "k", "beside the pages", write()).await.unwrap();
}
