/*
Copyright 2026 The cluster-api-provider-mailgun Authors.

Licensed under the Apache License, Version 2.0 (the "License");
you may not use this file except in compliance with the License.
You may obtain a copy of the License at

    http://www.apache.org/licenses/LICENSE-2.0

Unless required by applicable law or agreed to in writing, software
distributed under the License is distributed on an "AS IS" BASIS,
WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
See the License for the specific language governing permissions and
limitations under the License.
*/

// Command demo runs the whole provider on one machine: it starts a local
// control plane (kube-apiserver + etcd), a local Mailgun stand-in unless
// Mailgun credentials are given, and the operator; applies the sample
// Cluster and MailgunCluster; and prints the email and the message ID
// recorded in the MailgunCluster's status.
//
// Run it with `make demo`. With MAILGUN_DOMAIN, MAILGUN_API_KEY and
// MAIL_RECIPIENT set (and optionally MAILGUN_API_BASE), it sends through
// the real Mailgun.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/yaml"

	infrav1 "github.com/capi-mailgun/cluster-api-provider-mailgun/api/v1beta1"
	"github.com/capi-mailgun/cluster-api-provider-mailgun/internal/config"
	"github.com/capi-mailgun/cluster-api-provider-mailgun/internal/operator"
	"github.com/capi-mailgun/cluster-api-provider-mailgun/test/support/mailgunfake"
	"github.com/capi-mailgun/cluster-api-provider-mailgun/test/support/poll"
	"github.com/capi-mailgun/cluster-api-provider-mailgun/test/support/testenv"
)

const (
	demoNamespace = "default"
	fakeDomain    = "sandbox.mailgun.local"
	fakeAPIKey    = "demo-key"
	fakeRecipient = "infrastructure-team@example.com"
)

func main() {
	keep := flag.Bool("keep-running", false, "keep the control plane and operator running after the email was sent, for exploring with kubectl")
	verbose := flag.Bool("v", false, "show the operator's logs")
	flag.Parse()
	if err := run(*keep, *verbose); err != nil {
		fmt.Fprintf(os.Stderr, "demo failed: %v\n", err)
		os.Exit(1)
	}
}

func run(keep, verbose bool) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	step("Starting a local control plane (kube-apiserver + etcd)")
	env, err := testenv.Start()
	if err != nil {
		return err
	}
	defer func() { _ = env.Stop() }()

	getenv := os.Getenv
	useRealMailgun := os.Getenv(config.EnvAPIKey) != "" && os.Getenv(config.EnvDomain) != "" && os.Getenv(config.EnvRecipient) != ""
	var fake *mailgunfake.Server
	if useRealMailgun {
		step("Using the real Mailgun API for domain %s (credentials from the environment)", os.Getenv(config.EnvDomain))
	} else {
		fake = mailgunfake.Start(fakeDomain, fakeAPIKey)
		defer fake.Close()
		step("No Mailgun credentials in the environment: started a local Mailgun stand-in at %s", fake.APIBase())
		fakeEnv := map[string]string{
			config.EnvDomain: fakeDomain, config.EnvAPIKey: fakeAPIKey,
			config.EnvRecipient: fakeRecipient, config.EnvAPIBase: fake.APIBase(),
		}
		getenv = func(k string) string { return fakeEnv[k] }
	}

	step("Starting the operator")
	opts := operator.DefaultOptions()
	opts.MetricsBindAddress = "0"
	opts.HealthProbeBindAddress = "0"
	opts.ConfigNamespace = ""
	opts.Getenv = getenv
	logger := zap.New(zap.WriteTo(os.Stderr))
	if !verbose {
		logger = zap.New(zap.WriteTo(discard{}))
	}
	opts.Logger = &logger
	mgrCtx, stopMgr := context.WithCancel(ctx)
	defer stopMgr()
	mgr, err := operator.New(mgrCtx, env.Config, opts)
	if err != nil {
		return err
	}
	mgrDone := make(chan error, 1)
	go func() { mgrDone <- mgr.Start(mgrCtx) }()

	step("Applying config/samples (Cluster + MailgunCluster)")
	mc, err := applySamples(ctx, env)
	if err != nil {
		return err
	}

	step("Waiting for the MailgunCluster to become Ready")
	mc, err = waitReady(ctx, env.Client, client.ObjectKeyFromObject(mc), 2*time.Minute)
	if err != nil {
		return err
	}

	fmt.Println()
	if fake != nil {
		for _, m := range fake.Messages() {
			fmt.Printf("Email accepted by the Mailgun stand-in:\n  Message-Id: %s\n  From:       %s\n  To:         %s\n  Reply-To:   %s\n  Subject:    %s\n\n%s\n",
				m.ID, m.From, strings.Join(m.To, ", "), m.ReplyTo, m.Subject, indent(m.Text))
		}
	}
	fmt.Printf("\nMailgunCluster %s/%s: Ready=%s, status.messageID=%s, provisioned=%v\n",
		mc.Namespace, mc.Name, conditions.GetReason(mc, infrav1.ReadyCondition), mc.Status.MessageID,
		mc.Status.Initialization.Provisioned != nil && *mc.Status.Initialization.Provisioned)

	if keep {
		kubeconfig := filepath.Join(os.TempDir(), "capmg-demo.kubeconfig")
		if err := os.WriteFile(kubeconfig, env.KubeConfig, 0o600); err != nil {
			return err
		}
		fmt.Printf("\nKeeping everything running. Try:\n  KUBECONFIG=%s kubectl get mailgunclusters -o wide\nPress Ctrl-C to stop.\n", kubeconfig)
		<-ctx.Done()
	}
	stopMgr()
	if err := <-mgrDone; err != nil && !errors.Is(err, context.Canceled) {
		return fmt.Errorf("operator: %w", err)
	}
	return nil
}

// applySamples creates the sample Cluster and MailgunCluster, and sets the
// owner reference Cluster API's Cluster controller would set (it does not
// run in this demo).
func applySamples(ctx context.Context, env *testenv.Env) (*infrav1.MailgunCluster, error) {
	cluster := &clusterv1.Cluster{}
	mc := &infrav1.MailgunCluster{}
	for file, obj := range map[string]client.Object{"cluster.yaml": cluster, "infrastructure_v1beta1_mailguncluster.yaml": mc} {
		if err := readObject(filepath.Join(env.RepoRoot, "config", "samples", file), obj); err != nil {
			return nil, err
		}
		obj.SetNamespace(demoNamespace)
	}
	if err := env.Client.Create(ctx, cluster); err != nil {
		return nil, fmt.Errorf("creating Cluster: %w", err)
	}
	mc.OwnerReferences = []metav1.OwnerReference{testenv.OwnerRef(cluster)}
	if err := env.Client.Create(ctx, mc); err != nil {
		return nil, fmt.Errorf("creating MailgunCluster: %w", err)
	}
	return mc, nil
}

func readObject(path string, obj runtime.Object) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if err := yaml.UnmarshalStrict(b, obj); err != nil {
		return fmt.Errorf("parsing %s: %w", path, err)
	}
	return nil
}

func waitReady(ctx context.Context, c client.Client, key types.NamespacedName, timeout time.Duration) (*infrav1.MailgunCluster, error) {
	mc := &infrav1.MailgunCluster{}
	var getErr error
	var last string
	ready, _ := poll.Until(ctx, timeout, 200*time.Millisecond, func() (bool, string) {
		if getErr = c.Get(ctx, key, mc); getErr != nil {
			return true, ""
		}
		if msg := conditions.GetMessage(mc, infrav1.ReadyCondition); msg != last && msg != "" {
			last = msg
			fmt.Printf("    ... %s: %s\n", conditions.GetReason(mc, infrav1.ReadyCondition), msg)
		}
		return conditions.IsTrue(mc, infrav1.ReadyCondition) && mc.Status.MessageID != "", ""
	})
	switch {
	case getErr != nil:
		return nil, getErr
	case !ready:
		return nil, fmt.Errorf("the MailgunCluster was not Ready after %v (last: %s)", timeout, last)
	}
	return mc, nil
}

func step(format string, args ...any) {
	fmt.Printf("==> "+format+"\n", args...)
}

func indent(s string) string {
	return "    " + strings.ReplaceAll(strings.TrimRight(s, "\n"), "\n", "\n    ")
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }
