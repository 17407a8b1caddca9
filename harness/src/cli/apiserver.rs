//! `rackproof apiserver`: the embedded Kubernetes API server over HTTPS, for kubectl and for
//! components run as processes.

use std::net::{Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::process::ExitCode;

use rackproof_apiserver::{ApiServer, User};
use rackproof_clock::Clock;

use super::{exit, print_error};

/// `rackproof apiserver`.
#[derive(Debug, clap::Args)]
pub(crate) struct ApiserverArgs {
    /// Where to write `admin.kubeconfig` and one `node-NAME.kubeconfig` per `--node`.
    #[arg(long)]
    kubeconfig_dir: PathBuf,
    /// Port on 127.0.0.1 (0: any free port).
    #[arg(long, default_value_t = 0)]
    port: u16,
    /// Node identities to write kubeconfigs for (`system:node:NAME`).
    #[arg(long = "node")]
    nodes: Vec<String>,
    /// Install Rackproof's CRDs (WorkerPool, ImageCatalog, MachineDeployment, MachineSet, Machine).
    #[arg(long)]
    with_crds: bool,
}

pub(crate) async fn serve(args: ApiserverArgs) -> ExitCode {
    let server = ApiServer::new(Clock::wall());
    if args.with_crds {
        let api: kube::Api<k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition> =
            kube::Api::all(server.admin_client());
        for crd in inplace_api::crd::crds() {
            if let Err(e) = api.create(&kube::api::PostParams::default(), &crd).await {
                print_error(&e);
                return ExitCode::from(exit::LAB_FAILED);
            }
        }
    }
    let https = match server
        .serve_https(SocketAddr::from((Ipv4Addr::LOCALHOST, args.port)))
        .await
    {
        Ok(https) => https,
        Err(e) => {
            print_error(&e);
            return ExitCode::from(exit::LAB_FAILED);
        }
    };
    if let Err(e) = std::fs::create_dir_all(&args.kubeconfig_dir) {
        eprintln!(
            "error: failed to create {}: {e}",
            args.kubeconfig_dir.display()
        );
        return ExitCode::from(exit::USAGE);
    }
    let mut users = vec![("admin".to_owned(), User::admin())];
    users.extend(
        args.nodes
            .iter()
            .map(|n| (format!("node-{n}"), User::node(n))),
    );
    for (file, user) in &users {
        let path = args.kubeconfig_dir.join(format!("{file}.kubeconfig"));
        if let Err(e) = https.write_kubeconfig(&path, user) {
            print_error(&e);
            return ExitCode::from(exit::LAB_FAILED);
        }
        println!("kubeconfig for {file}: {}", path.display());
    }
    println!(
        "serving the embedded API server at {} (Ctrl-C stops it)",
        https.url()
    );
    match tokio::signal::ctrl_c().await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: failed to wait for Ctrl-C: {e}");
            ExitCode::from(exit::LAB_FAILED)
        }
    }
}
