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

// Package operator wires the MailgunCluster and MailgunMachine controllers into a
// controller-runtime manager: flags, caches, metrics, health checks. main.go
// and the tests build the manager the same way.
package operator

import (
	"context"
	"crypto/tls"
	"flag"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/controller-runtime/pkg/metrics/filters"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	infrav1 "github.com/capi-mailgun/cluster-api-provider-mailgun/api/v1beta1"
	"github.com/capi-mailgun/cluster-api-provider-mailgun/controllers"
	"github.com/capi-mailgun/cluster-api-provider-mailgun/internal/config"
	"github.com/capi-mailgun/cluster-api-provider-mailgun/internal/mailer"
	"github.com/capi-mailgun/cluster-api-provider-mailgun/internal/metrics"
	"github.com/capi-mailgun/cluster-api-provider-mailgun/internal/send"
	"github.com/capi-mailgun/cluster-api-provider-mailgun/internal/sendprotocol"
)

// ConfigCheckName is the readiness check reporting whether the Mailgun
// settings are complete. Deployments exclude it from their readiness probe
// (/readyz?exclude=mailgun-config) so that an operator installed before its
// settings are filled in still becomes available.
const ConfigCheckName = "mailgun-config"

// Environment variables that set flag defaults. OLM passes
// olm.targetNamespaces as WATCH_NAMESPACE, and a Subscription's
// spec.config.env can name a user-owned Secret and ConfigMap, which OLM does
// not overwrite on upgrade the way it overwrites the bundle's own, and the
// directory of a metrics certificate mounted through spec.config.volumes:
// OLM lets a Subscription change a CSV Deployment's environment and volumes,
// not its arguments.
const (
	EnvWatchNamespace  = "WATCH_NAMESPACE"
	EnvSecretName      = "MAILGUN_SECRET_NAME"
	EnvConfigMapName   = "MAILGUN_CONFIGMAP_NAME"
	EnvMetricsCertPath = "METRICS_CERT_PATH"
)

func envOr(key, fallback string) string {
	if v := strings.TrimSpace(os.Getenv(key)); v != "" {
		return v
	}
	return fallback
}

// Options configure the operator; BindFlags maps them to command-line flags.
type Options struct {
	MetricsBindAddress string
	SecureMetrics      bool
	// MetricsCertPath is the directory of the metrics endpoint's serving
	// certificate (MetricsCertName) and key (MetricsCertKey), reloaded when
	// they change; empty leaves controller-runtime's default (the files in
	// $TMPDIR/k8s-metrics-server/serving-certs, else a self-signed one).
	MetricsCertPath         string
	MetricsCertName         string
	MetricsCertKey          string
	EnableHTTP2             bool
	HealthProbeBindAddress  string
	LeaderElect             bool
	LeaderElectionID        string
	LeaderElectionNamespace string
	LeaseDuration           time.Duration
	RenewDeadline           time.Duration
	RetryPeriod             time.Duration

	// WatchNamespace restricts the objects watched to one namespace.
	WatchNamespace string
	// WatchFilterValue restricts reconciliation to objects labelled
	// cluster.x-k8s.io/watch-filter=<value>.
	WatchFilterValue string
	// Concurrency and MachineConcurrency are the workers of the
	// MailgunCluster and MailgunMachine controllers.
	Concurrency        int
	MachineConcurrency int

	// ConfigNamespace holds the Mailgun Secret and ConfigMap, normally the
	// operator's own namespace.
	ConfigNamespace string
	SecretName      string
	ConfigMapName   string

	MailgunTimeout  time.Duration
	SettleTime      time.Duration
	RecheckInterval time.Duration
	// MaxBackoff caps the wait between failed calls to Mailgun for one
	// object; the wait starts at one second and doubles per failure.
	MaxBackoff time.Duration
	// MailgunQPS and MailgunBurst bound the rate of all requests to Mailgun
	// together; MailgunQPS 0 sets no bound.
	MailgunQPS   float64
	MailgunBurst int

	DeliveryPollInterval    time.Duration
	DeliveryTrackingTimeout time.Duration
	// CredentialsCheckInterval is how often the key and domain are checked
	// with Mailgun (a domain lookup) while the settings do not change.
	CredentialsCheckInterval time.Duration

	// Getenv reads the environment; nil means os.Getenv. Tests inject it.
	Getenv func(string) string

	// Seams for running several managers in one test process; the zero
	// values are what the binary uses.

	// Logger defaults to controller-runtime's global logger.
	Logger *logr.Logger
	// MetricsRegistry defaults to controller-runtime's global registry.
	MetricsRegistry prometheus.Registerer
	// SkipNameValidation allows more than one manager per process.
	SkipNameValidation bool
	// WrapClient, if set, wraps the manager's client, e.g. to inject
	// apiserver write failures.
	WrapClient func(client.Client) client.Client
}

// DefaultOptions are the flag defaults.
func DefaultOptions() Options {
	return Options{
		MetricsBindAddress:     ":8443",
		SecureMetrics:          true,
		MetricsCertPath:        envOr(EnvMetricsCertPath, ""),
		MetricsCertName:        "tls.crt",
		MetricsCertKey:         "tls.key",
		HealthProbeBindAddress: ":8081",
		LeaderElectionID:       "capmg-controller-manager.infrastructure.cluster.x-k8s.io",
		LeaseDuration:          15 * time.Second,
		RenewDeadline:          10 * time.Second,
		RetryPeriod:            2 * time.Second,
		Concurrency:            10,
		MachineConcurrency:     10,
		WatchNamespace:         os.Getenv(EnvWatchNamespace),
		ConfigNamespace:        ownNamespace(),
		SecretName:             envOr(EnvSecretName, config.DefaultSecretName),
		ConfigMapName:          envOr(EnvConfigMapName, config.DefaultConfigMapName),
		MailgunTimeout:         30 * time.Second,
		SettleTime:             35 * time.Minute,
		RecheckInterval:        5 * time.Minute,
		MaxBackoff:             5 * time.Minute,
		MailgunQPS:             20,
		MailgunBurst:           40,

		DeliveryPollInterval:     15 * time.Second,
		DeliveryTrackingTimeout:  12 * time.Hour,
		CredentialsCheckInterval: 5 * time.Minute,
	}
}

// BindFlags registers the options as flags on fs.
func (o *Options) BindFlags(fs *flag.FlagSet) {
	fs.StringVar(&o.MetricsBindAddress, "metrics-bind-address", o.MetricsBindAddress,
		"Address the metrics endpoint binds to; \"0\" disables it.")
	fs.BoolVar(&o.SecureMetrics, "metrics-secure", o.SecureMetrics,
		"Serve metrics over HTTPS, authenticated and authorized through the apiserver.")
	fs.StringVar(&o.MetricsCertPath, "metrics-cert-path", o.MetricsCertPath,
		"Directory of the metrics endpoint's serving certificate and key (e.g. a cert-manager Secret mounted there), reloaded when they change; empty leaves controller-runtime's default: the files in $TMPDIR/k8s-metrics-server/serving-certs, else a self-signed certificate. Default: $"+EnvMetricsCertPath+".")
	fs.StringVar(&o.MetricsCertName, "metrics-cert-name", o.MetricsCertName, "File name of the metrics serving certificate in --metrics-cert-path.")
	fs.StringVar(&o.MetricsCertKey, "metrics-cert-key", o.MetricsCertKey, "File name of the metrics serving key in --metrics-cert-path.")
	fs.BoolVar(&o.EnableHTTP2, "enable-http2", o.EnableHTTP2,
		"Allow HTTP/2 on the metrics endpoint. Off by default: HTTP/2 Rapid Reset (CVE-2023-44487) and Stream Cancellation (CVE-2023-39325).")
	fs.StringVar(&o.HealthProbeBindAddress, "health-probe-bind-address", o.HealthProbeBindAddress,
		"Address the /healthz and /readyz endpoints bind to.")
	fs.BoolVar(&o.LeaderElect, "leader-elect", o.LeaderElect,
		"Enable leader election, so that only one replica reconciles at a time.")
	fs.StringVar(&o.LeaderElectionID, "leader-election-id", o.LeaderElectionID, "Name of the leader election Lease.")
	fs.StringVar(&o.LeaderElectionNamespace, "leader-election-namespace", o.LeaderElectionNamespace,
		"Namespace of the leader election Lease; defaults to the operator's namespace.")
	fs.DurationVar(&o.LeaseDuration, "leader-elect-lease-duration", o.LeaseDuration,
		"How long non-leaders wait before taking over an unrenewed leadership.")
	fs.DurationVar(&o.RenewDeadline, "leader-elect-renew-deadline", o.RenewDeadline,
		"How long the leader retries renewing before giving up leadership.")
	fs.DurationVar(&o.RetryPeriod, "leader-elect-retry-period", o.RetryPeriod,
		"How long to wait between leader election attempts.")
	fs.StringVar(&o.WatchNamespace, "namespace", o.WatchNamespace,
		"Only watch MailgunClusters, MailgunMachines and Cluster API's objects in this namespace; empty watches all namespaces.")
	fs.StringVar(&o.WatchFilterValue, "watch-filter", o.WatchFilterValue,
		"Only reconcile objects with the label cluster.x-k8s.io/watch-filter set to this value.")
	fs.IntVar(&o.Concurrency, "mailguncluster-concurrency", o.Concurrency,
		"Number of MailgunClusters reconciled in parallel.")
	fs.IntVar(&o.MachineConcurrency, "machine-concurrency", o.MachineConcurrency,
		"Number of MailgunMachines reconciled in parallel.")
	fs.StringVar(&o.ConfigNamespace, "config-namespace", o.ConfigNamespace,
		"Namespace of the Mailgun Secret and ConfigMap and of the MailgunClusterIdentities' Secrets; defaults to the operator's own namespace (POD_NAMESPACE). Empty reads settings from the environment only, and no identity can be used.")
	fs.StringVar(&o.SecretName, "mailgun-secret-name", o.SecretName,
		"Secret holding the Mailgun API key (key api_key).")
	fs.StringVar(&o.ConfigMapName, "mailgun-configmap-name", o.ConfigMapName,
		"ConfigMap holding mailgun_domain, mail_recipient and mailgun_api_base.")
	fs.DurationVar(&o.MailgunTimeout, "mailgun-timeout", o.MailgunTimeout, "Timeout of each call to the Mailgun API.")
	fs.DurationVar(&o.SettleTime, "send-settle-time", o.SettleTime,
		"After a send attempt that got no answer, how long to look for the message in Mailgun's events before sending again. "+
			"Mailgun's events can lag by up to about 30 minutes; a shorter time risks a second email. "+
			"Must be longer than --mailgun-timeout (plus --leader-elect-renew-deadline with --leader-elect).")
	fs.DurationVar(&o.RecheckInterval, "mailgun-recheck-interval", o.RecheckInterval,
		"How long to wait before retrying after Mailgun refused the credentials or recipient.")
	fs.DurationVar(&o.MaxBackoff, "mailgun-max-backoff", o.MaxBackoff,
		"Cap of the wait between failed calls to Mailgun for one MailgunCluster or MailgunMachine (it starts at 1s and doubles per failure).")
	fs.Float64Var(&o.MailgunQPS, "mailgun-qps", o.MailgunQPS,
		"Bound on requests per second to each Mailgun account (API key and region), all MailgunClusters and MailgunMachines using it together; 0 sets no bound.")
	fs.IntVar(&o.MailgunBurst, "mailgun-burst", o.MailgunBurst,
		"How many requests to Mailgun may go out at once above --mailgun-qps.")
	fs.DurationVar(&o.DeliveryPollInterval, "delivery-poll-interval", o.DeliveryPollInterval,
		"Interval between reads of Mailgun's delivery events, one page per recipient and Mailgun domain for all the accepted emails followed; it grows with the age of the youngest without an outcome, to at most 40 times this value.")
	fs.DurationVar(&o.DeliveryTrackingTimeout, "delivery-tracking-timeout", o.DeliveryTrackingTimeout,
		"How long after acceptance to follow an email's delivery before giving up.")
	fs.DurationVar(&o.CredentialsCheckInterval, "credentials-check-interval", o.CredentialsCheckInterval,
		"How often to check the API key and domain with Mailgun while the settings do not change.")
}

// Validate reports invalid option values.
func (o *Options) Validate() error {
	if strings.Contains(o.WatchNamespace, ",") {
		return fmt.Errorf("--namespace (or WATCH_NAMESPACE) names several namespaces (%q); watch one namespace or all of them", o.WatchNamespace)
	}
	if o.Concurrency < 1 || o.MachineConcurrency < 1 {
		return fmt.Errorf("--mailguncluster-concurrency and --machine-concurrency must be at least 1, got %d and %d", o.Concurrency, o.MachineConcurrency)
	}
	if o.MailgunQPS < 0 || (o.MailgunQPS > 0 && o.MailgunBurst < 1) {
		return fmt.Errorf("--mailgun-qps must not be negative, and --mailgun-burst must be at least 1 with it (got %v and %d)", o.MailgunQPS, o.MailgunBurst)
	}
	if o.MailgunTimeout <= 0 || o.SettleTime <= 0 || o.RecheckInterval <= 0 || o.MaxBackoff <= 0 ||
		o.DeliveryPollInterval <= 0 || o.DeliveryTrackingTimeout <= 0 || o.CredentialsCheckInterval <= 0 {
		return fmt.Errorf("--mailgun-timeout, --send-settle-time, --mailgun-recheck-interval, --mailgun-max-backoff, --delivery-poll-interval, " +
			"--delivery-tracking-timeout and --credentials-check-interval must be positive")
	}
	if o.MetricsCertPath != "" {
		if !o.SecureMetrics {
			return fmt.Errorf("--metrics-cert-path (or $%s) is set but --metrics-secure=false: the metrics endpoint serves plain HTTP", EnvMetricsCertPath)
		}
		// Without a usable pair the endpoint would fail only once started,
		// or quietly fall back to a self-signed certificate that scrapers
		// verifying TLS refuse.
		cert, key := filepath.Join(o.MetricsCertPath, o.MetricsCertName), filepath.Join(o.MetricsCertPath, o.MetricsCertKey)
		if _, err := tls.LoadX509KeyPair(cert, key); err != nil {
			return fmt.Errorf("--metrics-cert-path (or $%s) %s: the metrics serving certificate and key (--metrics-cert-name, --metrics-cert-key) cannot be loaded: %w",
				EnvMetricsCertPath, o.MetricsCertPath, err)
		}
	}
	if in := o.sendInFlight(); o.SettleTime <= in {
		return fmt.Errorf("--send-settle-time (%s) must be longer than a send can be in flight after its claim, %s "+
			"(--mailgun-timeout, plus --leader-elect-renew-deadline with --leader-elect): else a send still on its way "+
			"is not yet in Mailgun's events when the settle time ends, and the email goes out twice", o.SettleTime, in)
	}
	return nil
}

// sendInFlight is how long after its claim a send may still be writing to
// Mailgun: its timeout and, with leader election, the lease's write
// deadline, which can fall up to a renew deadline after the claim.
func (o *Options) sendInFlight() time.Duration {
	if o.LeaderElect {
		return o.MailgunTimeout + o.RenewDeadline
	}
	return o.MailgunTimeout
}

// ownNamespace is the namespace the operator runs in: POD_NAMESPACE (set
// from the downward API), else the service account's namespace file.
func ownNamespace() string {
	if ns := os.Getenv("POD_NAMESPACE"); ns != "" {
		return ns
	}
	if b, err := os.ReadFile("/var/run/secrets/kubernetes.io/serviceaccount/namespace"); err == nil {
		return strings.TrimSpace(string(b))
	}
	return ""
}

// NewScheme returns a scheme with every type the operator reads.
func NewScheme() (*runtime.Scheme, error) {
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, clusterv1.AddToScheme, infrav1.AddToScheme} {
		if err := add(scheme); err != nil {
			return nil, fmt.Errorf("building scheme: %w", err)
		}
	}
	return scheme, nil
}

// New builds a manager running the MailgunCluster and MailgunMachine
// controllers.
func New(ctx context.Context, restConfig *rest.Config, o Options) (ctrl.Manager, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	scheme, err := NewScheme()
	if err != nil {
		return nil, err
	}
	identity, err := newIdentity()
	if err != nil {
		return nil, err
	}
	mgrOptions := managerOptions(ctx, o, scheme)
	var lease send.Lease
	if o.LeaderElect {
		ns := mgrOptions.LeaderElectionNamespace
		if ns == "" {
			ns = ownNamespace()
		}
		l, err := newFencedLease(restConfig, ns, o.LeaderElectionID, identity, o.RenewDeadline, mgrOptions.Logger.WithName("leader-election"))
		if err != nil {
			return nil, err
		}
		mgrOptions.LeaderElectionResourceLockInterface = l
		lease = l
	}
	mgr, err := ctrl.NewManager(restConfig, mgrOptions)
	if err != nil {
		return nil, fmt.Errorf("creating manager: %w", err)
	}

	source := &config.Source{
		Reader:        mgr.GetClient(),
		Secrets:       &config.SecretReader{Metadata: mgr.GetClient(), Live: mgr.GetAPIReader()},
		Namespace:     o.ConfigNamespace,
		SecretName:    o.SecretName,
		ConfigMapName: o.ConfigMapName,
		Getenv:        o.Getenv,
	}
	m := metrics.New()
	registry := o.MetricsRegistry
	if registry == nil {
		registry = ctrlmetrics.Registry
	}
	if err := m.Register(registry); err != nil {
		return nil, err
	}
	// One connection pool for every Mailgun call: the reconcile workers,
	// the readiness check's domain lookup and the delivery tracker.
	mailers := mailer.NewPool(o.MailgunTimeout, o.Concurrency+o.MachineConcurrency+1, mailer.Limit{QPS: o.MailgunQPS, Burst: o.MailgunBurst})
	creds := &credentials{mailers: mailers, ttl: o.CredentialsCheckInterval, log: mgr.GetLogger().WithName("mailgun-credentials")}
	deliveries := &send.DeliveryTracker{
		Interval: o.DeliveryPollInterval,
		Timeout:  o.DeliveryTrackingTimeout,
		List: func(s mailer.Settings, since time.Time) send.DeliveryPages {
			return mailers.Client(s).DeliveryEvents(since)
		},
		Log: mgr.GetLogger().WithName("delivery-tracker"),
	}
	if err := mgr.Add(deliveries); err != nil {
		return nil, fmt.Errorf("adding the delivery tracker: %w", err)
	}
	sender := send.Sender{
		Client:   mgr.GetClient(),
		Recorder: mgr.GetEventRecorder("mailguncluster-controller"),
		Settings: config.Settings{Operator: *source, Reader: mgr.GetClient()},
		NewMailer: func(s mailer.Settings) send.Mailer {
			return mailers.Client(s)
		},
		Metrics:                 m,
		Protocol:                o.protocol(identity),
		Credentials:             creds,
		APIReader:               mgr.GetAPIReader(),
		Lease:                   lease,
		Deliveries:              deliveries,
		DeliveryTrackingTimeout: o.DeliveryTrackingTimeout,
	}
	configObjects := controllers.ConfigObjects{Namespace: o.ConfigNamespace, SecretName: o.SecretName, ConfigMapName: o.ConfigMapName}
	clusters := controllers.NewMailgunClusterReconciler(sender)
	clusters.ConfigObjects = configObjects
	clusters.WatchFilterValue = o.WatchFilterValue
	if err := clusters.SetupWithManager(ctx, mgr, controller.Options{
		MaxConcurrentReconciles: o.Concurrency,
		SkipNameValidation:      ptr.To(o.SkipNameValidation),
	}); err != nil {
		return nil, err
	}
	sender.Recorder = mgr.GetEventRecorder("mailgunmachine-controller")
	machines := controllers.NewMailgunMachineReconciler(sender)
	machines.ConfigObjects = configObjects
	machines.WatchFilterValue = o.WatchFilterValue
	if err := machines.SetupWithManager(ctx, mgr, controller.Options{
		MaxConcurrentReconciles: o.MachineConcurrency,
		SkipNameValidation:      ptr.To(o.SkipNameValidation),
	}); err != nil {
		return nil, err
	}
	if err := addHealthChecks(mgr, source, creds); err != nil {
		return nil, err
	}
	if o.ConfigNamespace != "" {
		starter := &userObjectsStarter{
			objects: config.UserObjects{
				Client: mgr.GetClient(), Reader: mgr.GetAPIReader(),
				Namespace: o.ConfigNamespace, SecretName: o.SecretName, ConfigMapName: o.ConfigMapName,
			},
			log:           mgr.GetLogger().WithName("mailgun-settings-objects"),
			firstInterval: time.Second,
			maxInterval:   30 * time.Second,
		}
		if err := mgr.Add(starter); err != nil {
			return nil, fmt.Errorf("adding the settings objects starter: %w", err)
		}
		if err := mgr.AddReadyzCheck(UserObjectsCheckName, starter.Check); err != nil {
			return nil, fmt.Errorf("adding readiness check: %w", err)
		}
	}
	return mgr, nil
}

// managerOptions maps o to the manager's options: what it caches, where it
// serves metrics and probes, leader election and logging.
func managerOptions(ctx context.Context, o Options, scheme *runtime.Scheme) ctrl.Options {
	cacheOptions := cache.Options{ByObject: map[client.Object]cache.ByObject{}}
	if o.WatchNamespace != "" {
		cacheOptions.DefaultNamespaces = map[string]cache.Config{o.WatchNamespace: {}}
		// Namespaces are read for MailgunClusterIdentities' selectors:
		// only the watched one matters.
		cacheOptions.ByObject[&corev1.Namespace{}] = cache.ByObject{
			Field: fields.OneTermEqualSelector("metadata.name", o.WatchNamespace),
		}
	}
	if o.ConfigNamespace != "" {
		// Secrets only from the operator's namespace, and only their
		// metadata (config.SecretReader reads the data of the ones in use
		// past the cache): the namespace may hold other operators' Secrets.
		// Annotations go too: kubectl apply's last-applied-configuration
		// holds a Secret's data.
		cacheOptions.ByObject[&corev1.Secret{}] = cache.ByObject{
			Namespaces: map[string]cache.Config{o.ConfigNamespace: {}},
			Transform: func(obj any) (any, error) {
				if m, ok := obj.(metav1.Object); ok {
					m.SetAnnotations(nil)
					m.SetManagedFields(nil)
				}
				return obj, nil
			},
		}
		cacheOptions.ByObject[&corev1.ConfigMap{}] = cache.ByObject{
			Namespaces: map[string]cache.Config{o.ConfigNamespace: {}},
			Field:      fields.OneTermEqualSelector("metadata.name", o.ConfigMapName),
		}
	}

	metricsOptions := o.metricsOptions()

	leaderElectionNamespace := o.LeaderElectionNamespace
	if leaderElectionNamespace == "" {
		leaderElectionNamespace = o.ConfigNamespace
	}
	logger := ctrl.Log
	if o.Logger != nil {
		logger = *o.Logger
	}
	mgrOptions := ctrl.Options{
		Scheme:                        scheme,
		Cache:                         cacheOptions,
		Metrics:                       metricsOptions,
		HealthProbeBindAddress:        o.HealthProbeBindAddress,
		LeaderElection:                o.LeaderElect,
		LeaderElectionID:              o.LeaderElectionID,
		LeaderElectionNamespace:       leaderElectionNamespace,
		LeaderElectionReleaseOnCancel: true,
		LeaseDuration:                 &o.LeaseDuration,
		RenewDeadline:                 &o.RenewDeadline,
		RetryPeriod:                   &o.RetryPeriod,
		Logger:                        quietLeaseRelease(ctx, logger),
	}
	if o.WrapClient != nil {
		mgrOptions.NewClient = func(config *rest.Config, options client.Options) (client.Client, error) {
			c, err := client.New(config, options)
			if err != nil {
				return nil, err
			}
			return o.WrapClient(c), nil
		}
	}
	return mgrOptions
}

// protocol is the send protocol with o's timings, for the replica holder.
func (o Options) protocol(holder string) sendprotocol.Protocol {
	return sendprotocol.Protocol{
		Holder:          holder,
		SettleTime:      o.SettleTime,
		RecheckInterval: o.RecheckInterval,
		Backoff:         min(time.Second, o.MaxBackoff),
		MaxBackoff:      o.MaxBackoff,
		ConflictDelay:   time.Second,
	}
}

// addHealthChecks registers liveness and readiness: the manager is alive
// while it runs; it is ready once its caches serve and, separately
// (excluded from the Deployment's probe), the Mailgun settings are usable.
func addHealthChecks(mgr ctrl.Manager, source *config.Source, creds *credentials) error {
	if err := mgr.AddHealthzCheck("ping", healthz.Ping); err != nil {
		return fmt.Errorf("adding health check: %w", err)
	}
	if err := mgr.AddReadyzCheck("ping", healthz.Ping); err != nil {
		return fmt.Errorf("adding readiness check: %w", err)
	}
	if err := mgr.AddReadyzCheck(ConfigCheckName, configCheck(mgr, source, creds)); err != nil {
		return fmt.Errorf("adding readiness check: %w", err)
	}
	return nil
}

// configCheck reports whether the Mailgun settings are usable, and logs
// exactly what is missing whenever that changes: the readiness endpoint
// itself withholds the reason.
func configCheck(mgr ctrl.Manager, source *config.Source, creds *credentials) healthz.Checker {
	log := mgr.GetLogger().WithName("mailgun-config")
	var mu sync.Mutex
	last := "unset"
	return func(req *http.Request) error {
		err := checkConfig(req.Context(), source, creds)
		state := "ok"
		if err != nil {
			state = err.Error()
		}
		mu.Lock()
		defer mu.Unlock()
		if state != last {
			last = state
			if err != nil {
				log.Info("Mailgun settings are not usable; MailgunClusters wait until they are fixed", "problems", state)
			} else {
				log.Info("Mailgun settings are complete")
			}
		}
		return err
	}
}

func checkConfig(ctx context.Context, source *config.Source, creds *credentials) error {
	settings, err := source.Load(ctx)
	if err != nil {
		return err
	}
	if err := source.Check(settings); err != nil {
		return err
	}
	// Readiness is about this operator, not Mailgun: only Mailgun's
	// definite refusal of the key, domain or region fails it. While Mailgun
	// is down or slow the check passes (the MailgunClusters' conditions and
	// the send failure metric report the outage), and it never waits
	// longer than a probe would.
	ctx, cancel := context.WithTimeout(ctx, readinessMailgunTimeout)
	defer cancel()
	if err := creds.Verify(ctx, settings); mailer.RefusesSettings(err) {
		return err
	}
	return nil
}

// readinessMailgunTimeout bounds the domain lookup of a readiness check,
// under the 1s default timeout of a probe.
const readinessMailgunTimeout = 900 * time.Millisecond

// metricsOptions serve the metrics endpoint: over HTTPS behind the
// apiserver's authentication and authorization when secure, with the
// certificate in MetricsCertPath if given.
func (o *Options) metricsOptions() metricsserver.Options {
	opts := metricsserver.Options{
		BindAddress:   o.MetricsBindAddress,
		SecureServing: o.SecureMetrics,
		TLSOpts:       []func(*tls.Config){metricsTLS(o.EnableHTTP2)},
	}
	if o.SecureMetrics {
		opts.FilterProvider = filters.WithAuthenticationAndAuthorization
	}
	if o.MetricsCertPath != "" {
		opts.CertDir, opts.CertName, opts.KeyName = o.MetricsCertPath, o.MetricsCertName, o.MetricsCertKey
	}
	return opts
}

// metricsTLS hardens the metrics endpoint's TLS as the Cluster API and
// kubebuilder scaffolds do: TLS 1.2 at least, and HTTP/1.1 only unless
// HTTP/2 is asked for, since HTTP/2's stream resets let a client tie up the
// server (CVE-2023-44487, CVE-2023-39325).
func metricsTLS(enableHTTP2 bool) func(*tls.Config) {
	return func(c *tls.Config) {
		c.MinVersion = tls.VersionTLS12
		if !enableHTTP2 {
			c.NextProtos = []string{"http/1.1"}
		}
	}
}
