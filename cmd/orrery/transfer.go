package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/data/azcosmos"
	"github.com/schollz/progressbar/v3"

	"github.com/orrery-db/orrery/server"
	"github.com/orrery-db/orrery/transfer"
)

// endpointFlags are the flags that name a container of any Cosmos endpoint.
type endpointFlags struct {
	endpoint, key, database, container, caCert string
	insecure, quiet                            bool
}

func (f *endpointFlags) register(fs *flag.FlagSet) {
	endpointFlag(fs, &f.endpoint) // Orrery, the emulator or Azure
	fs.StringVar(&f.key, "key", env("ORRERY_KEY", server.EmulatorKey), "account key (env ORRERY_KEY; default: the emulator's well-known key)")
	fs.StringVar(&f.database, "database", "", "database (required)")
	fs.StringVar(&f.container, "container", "", "container (required)")
	fs.StringVar(&f.caCert, "ca-cert", "", "PEM file of a certificate to trust for https (e.g. the output of 'orrery cert')")
	fs.BoolVar(&f.insecure, "insecure", false, "do not verify the server's TLS certificate")
	fs.BoolVar(&f.quiet, "quiet", false, "no progress bar (or, when standard error is not a terminal, no progress line every 10 s)")
}

// progressLogEvery is how often an import or export whose standard error is
// not a terminal (a log collector, a CI job) logs its progress instead of
// drawing a bar.
const progressLogEvery = 10 * time.Second

// progressLog logs a transfer's progress, at most once per every.
type progressLog struct {
	log   *slog.Logger
	msg   string
	every time.Duration
	size  int64 // bytes of the input, 0 when unknown
	mu    sync.Mutex
	last  time.Time
}

// report is a transfer.Progress callback.
func (l *progressLog) report(p transfer.Progress) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := time.Now()
	if l.last.IsZero() {
		l.last = now // the first line comes after every, not at once
		if l.every > 0 {
			return
		}
	}
	if now.Sub(l.last) < l.every {
		return
	}
	l.last = now
	args := []any{"written", p.Written, "skipped", p.Skipped, "failed", p.Failed}
	if p.BytesRead > 0 {
		args = append(args, "bytes read", p.BytesRead)
		if l.size > 0 {
			args = append(args, "of", l.size)
		}
	}
	l.log.Info(l.msg, args...)
}

// stderrLog is the logger of the transfer commands' progress lines.
func stderrLog() *slog.Logger { return slog.New(slog.NewTextHandler(os.Stderr, nil)) }

// isTerminal reports whether f is a terminal (a character device).
func isTerminal(f *os.File) bool {
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// client connects to the endpoint.
func (f *endpointFlags) client() (*azcosmos.Client, error) {
	if f.database == "" || f.container == "" {
		return nil, errors.New("--database and --container are required")
	}
	endpoint, err := endpointURL(f.endpoint)
	if err != nil {
		return nil, err
	}
	cred, err := azcosmos.NewKeyCredential(f.key)
	if err != nil {
		return nil, fmt.Errorf("--key: %w", err)
	}
	opts := &azcosmos.ClientOptions{}
	if f.caCert != "" || f.insecure {
		tc := &tls.Config{MinVersion: tls.VersionTLS12, InsecureSkipVerify: f.insecure}
		if f.caCert != "" {
			pemBytes, err := os.ReadFile(f.caCert)
			if err != nil {
				return nil, err
			}
			pool, err := x509.SystemCertPool()
			if err != nil {
				pool = x509.NewCertPool()
			}
			if !pool.AppendCertsFromPEM(pemBytes) {
				return nil, fmt.Errorf("--ca-cert: no certificate in %s", f.caCert)
			}
			tc.RootCAs = pool
		}
		transport := http.DefaultTransport.(*http.Transport).Clone()
		transport.TLSClientConfig = tc
		opts.ClientOptions = azcore.ClientOptions{Transport: &http.Client{Transport: transport}}
	}
	return azcosmos.NewClientWithKey(endpoint, cred, opts)
}

// interruptible is a context that ends on SIGINT or SIGTERM, so that an
// interrupted transfer saves its state before exiting.
func interruptible() (context.Context, context.CancelFunc) {
	return signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
}

func importCmd(args []string) error {
	fs := flag.NewFlagSet("import", flag.ContinueOnError)
	var ef endpointFlags
	ef.register(fs)
	mode := fs.String("mode", "upsert", "upsert (idempotent), create (an existing id is a failure) or create-if-absent (an existing item is kept)")
	concurrency := fs.Int("concurrency", 16, "batches in flight")
	pkPath := fs.String("partition-key", "", "create the database and container if missing, with this partition key path (e.g. /pk)")
	resume := fs.Bool("resume", false, "record progress in FILE.import-state and, when it exists, start after what it says is done")
	errorsFile := fs.String("errors", "", "write each failed record, with its cause, as a JSON line to this file")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "Usage: orrery import [flags] FILE   (JSON Lines or a JSON array of items; - for standard input)")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		fs.Usage()
		return errors.New("import takes one file")
	}
	path := fs.Arg(0)
	client, err := ef.client()
	if err != nil {
		return err
	}
	ctx, stop := interruptible()
	defer stop()
	if *pkPath != "" {
		if err := ensureContainer(ctx, client, ef.database, ef.container, *pkPath); err != nil {
			return err
		}
	}
	container, err := client.NewContainer(ef.database, ef.container)
	if err != nil {
		return err
	}
	var in io.Reader = os.Stdin
	size := int64(-1)
	if path != "-" {
		f, err := os.Open(path)
		if err != nil {
			return err
		}
		defer f.Close()
		if st, err := f.Stat(); err == nil {
			size = st.Size()
		}
		in = f
	} else if *resume {
		return errors.New("--resume needs a file, not standard input")
	}
	opts := transfer.ImportOptions{Mode: transfer.Mode(*mode), Concurrency: *concurrency}
	if *resume {
		opts.StateFile = path + ".import-state"
	}
	if *errorsFile != "" {
		errFile, err := os.Create(*errorsFile)
		if err != nil {
			return err
		}
		defer errFile.Close()
		opts.Errors = errFile
	}
	switch {
	case ef.quiet:
	case isTerminal(os.Stderr):
		bar := progressbar.DefaultBytes(size, "importing")
		opts.Progress = func(p transfer.Progress) { _ = bar.Set64(p.BytesRead) }
		defer bar.Finish()
	default:
		opts.Progress = (&progressLog{log: stderrLog(), msg: "import progress", every: progressLogEvery, size: size}).report
	}
	sum, err := transfer.Import(ctx, container, in, opts)
	if sum != nil {
		fmt.Fprintln(os.Stderr, "\nimport:", sum)
	}
	if errors.Is(err, context.Canceled) && opts.StateFile != "" {
		return fmt.Errorf("interrupted: run the same command again to resume (%s)", opts.StateFile)
	}
	if err == nil && opts.StateFile != "" {
		_ = os.Remove(opts.StateFile)
	}
	if err == nil && sum.Failed > 0 {
		return fmt.Errorf("%d records failed", sum.Failed)
	}
	return err
}

func exportCmd(args []string) error {
	fs := flag.NewFlagSet("export", flag.ContinueOnError)
	var ef endpointFlags
	ef.register(fs)
	format := fs.String("format", "jsonl", "jsonl (one item a line) or json (an array)")
	query := fs.String("query", "", "export what this query selects (whole items); every item when empty")
	out := fs.String("o", "-", "output file; - for standard output")
	resume := fs.Bool("resume", false, "record progress in FILE.export-state and, when it exists, continue after the last finished page (needs -o)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	client, err := ef.client()
	if err != nil {
		return err
	}
	container, err := client.NewContainer(ef.database, ef.container)
	if err != nil {
		return err
	}
	ctx, stop := interruptible()
	defer stop()
	opts := transfer.ExportOptions{Format: transfer.Format(*format), Query: *query}
	switch {
	case ef.quiet:
	case isTerminal(os.Stderr):
		bar := progressbar.Default(-1, "exporting")
		opts.Progress = func(p transfer.Progress) { _ = bar.Set64(p.Written) }
		defer bar.Finish()
	default:
		opts.Progress = (&progressLog{log: stderrLog(), msg: "export progress", every: progressLogEvery}).report
	}
	var sum *transfer.Summary
	switch {
	case *out == "-" && *resume:
		return errors.New("--resume needs -o FILE")
	case *out == "-":
		sum, err = transfer.Export(ctx, container, os.Stdout, opts)
	default:
		state := ""
		if *resume {
			state = *out + ".export-state"
		}
		sum, err = transfer.ExportFile(ctx, container, *out, state, opts)
		if errors.Is(err, context.Canceled) && state != "" {
			return fmt.Errorf("interrupted: run the same command again to resume (%s)", state)
		}
		if err == nil && state != "" {
			_ = os.Remove(state)
		}
	}
	if sum != nil {
		fmt.Fprintln(os.Stderr, "\nexport:", sum)
	}
	return err
}

// ensureContainer creates the database and the container when missing.
func ensureContainer(ctx context.Context, client *azcosmos.Client, db, container, pkPath string) error {
	if _, err := client.CreateDatabase(ctx, azcosmos.DatabaseProperties{ID: db}, nil); err != nil && !isStatus(err, 409) {
		return fmt.Errorf("creating database %s: %w", db, err)
	}
	d, err := client.NewDatabase(db)
	if err != nil {
		return err
	}
	props := azcosmos.ContainerProperties{ID: container, PartitionKeyDefinition: azcosmos.PartitionKeyDefinition{Paths: []string{pkPath}}}
	if _, err := d.CreateContainer(ctx, props, nil); err != nil && !isStatus(err, 409) {
		return fmt.Errorf("creating container %s: %w", container, err)
	}
	return nil
}

func isStatus(err error, status int) bool {
	var re *azcore.ResponseError
	return errors.As(err, &re) && re.StatusCode == status
}

// seedServer loads a seed file into the server listening at endpoint.
func seedServer(ctx context.Context, endpoint, key, path string) (*transfer.Summary, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	cred, err := azcosmos.NewKeyCredential(key)
	if err != nil {
		return nil, err
	}
	client, err := azcosmos.NewClientWithKey(endpoint, cred, &azcosmos.ClientOptions{ClientOptions: policy.ClientOptions{}})
	if err != nil {
		return nil, err
	}
	return transfer.Seed(ctx, client, f)
}
