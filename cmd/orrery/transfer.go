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
	"slices"
	"strings"
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
	fs.BoolVar(&f.quiet, "q", false, "same as --quiet")
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
	// The policy lets import send the undefined partition key of items
	// without a partition key property, which the SDK cannot express.
	opts := &azcosmos.ClientOptions{ClientOptions: azcore.ClientOptions{PerCallPolicies: []policy.Policy{transfer.PartitionKeyPolicy()}}}
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
		opts.Transport = &http.Client{Transport: transport}
	}
	return azcosmos.NewClientWithKey(endpoint, cred, opts)
}

// interruptible is a context that ends on SIGINT or SIGTERM, so that an
// interrupted transfer finishes what is in flight and saves its state
// before exiting; a second signal exits at once (a resumable import's
// state stays exact: what was in flight is checked when it resumes).
func interruptible(what string) (context.Context, func()) {
	ctx, cancel := context.WithCancel(context.Background())
	ch := make(chan os.Signal, 2)
	signal.Notify(ch, os.Interrupt, syscall.SIGTERM)
	go func() {
		if _, ok := <-ch; !ok {
			return
		}
		cancel()
		fmt.Fprintf(os.Stderr, "\ninterrupted: %s (press Ctrl-C again to quit at once)\n", what)
		if _, ok := <-ch; ok {
			os.Exit(130)
		}
	}()
	return ctx, func() { signal.Stop(ch); close(ch); cancel() }
}

// itemBar is a progress bar that counts items: a bar once total is known
// (ChangeMax64), a spinner with the count until then.
func itemBar(w io.Writer, total int64, desc string) *progressbar.ProgressBar {
	return progressbar.NewOptions64(total,
		progressbar.OptionSetWriter(w),
		progressbar.OptionSetDescription(desc),
		progressbar.OptionSetItsString("items"),
		progressbar.OptionShowCount(),
		progressbar.OptionShowIts(),
		progressbar.OptionSetWidth(30),
		progressbar.OptionThrottle(100*time.Millisecond),
		progressbar.OptionSpinnerType(14),
		progressbar.OptionSetRenderBlankState(true),
		progressbar.OptionOnCompletion(func() { fmt.Fprintln(w) }),
	)
}

// missingContainer explains a container that does not exist, and how to
// have import create it.
func missingContainer(ctx context.Context, client *azcosmos.Client, ef *endpointFlags, importing bool) error {
	what := fmt.Sprintf("container %s does not exist in database %s at %s", ef.container, ef.database, ef.endpoint)
	if db, err := client.NewDatabase(ef.database); err == nil {
		if _, err := db.Read(ctx, nil); isStatus(err, http.StatusNotFound) {
			what = fmt.Sprintf("database %s does not exist at %s", ef.database, ef.endpoint)
		}
	}
	if importing {
		return fmt.Errorf("%s: create it, or pass --partition-key with the path of its partition key (e.g. --partition-key /customerId) for import to create it", what)
	}
	return errors.New(what)
}

func importCmd(args []string) error {
	fs := flag.NewFlagSet("import", flag.ContinueOnError)
	var ef endpointFlags
	ef.register(fs)
	mode := fs.String("mode", "upsert", "upsert (idempotent), create (an existing id is a failure) or create-if-absent (an existing item is kept)")
	duplicates := fs.String("duplicates", "fail", "records with the id and partition key of an earlier record: fail (write the first, count the others as failed), first (write the first, skip the others) or last (write the last; upsert only)")
	concurrency := fs.Int("concurrency", 16, "batches in flight")
	pkPath := fs.String("partition-key", "", "create the database and container if missing, with this partition key path (e.g. /pk)")
	resume := fs.Bool("resume", false, "record progress in FILE.import-state and, when it exists, write exactly the records it does not record as done")
	errorsFile := fs.String("errors", "", "write each failed record, with its cause, as a JSON line to this file (appended to when resuming)")
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
	if path == "-" && *resume {
		return errors.New("--resume needs a file, not standard input")
	}
	opts := transfer.ImportOptions{Mode: transfer.Mode(*mode), Duplicates: transfer.Duplicates(*duplicates), Concurrency: *concurrency}
	if err := opts.Check(); err != nil {
		return err
	}
	client, err := ef.client()
	if err != nil {
		return err
	}
	state := ""
	if *resume {
		state = path + ".import-state"
	}
	ctx, stop := interruptible("finishing the writes in flight and recording where the import stopped")
	defer stop()
	if *pkPath != "" {
		// Interrupted while the container is made ready, the import ends at
		// once (the SDK's first request, for the account's properties, does
		// not end with its context): this run wrote nothing, and says so in
		// the words of any other interruption rather than as a failed request.
		ready := make(chan error, 1)
		go func() { ready <- ensureContainer(ctx, client, ef.database, ef.container, *pkPath) }()
		select {
		case err := <-ready:
			if errors.Is(err, context.Canceled) {
				return interruptedImport(state, "before this run wrote any record")
			}
			if err != nil {
				return err
			}
		case <-ctx.Done():
			return interruptedImport(state, "before this run wrote any record")
		}
	}
	container, err := client.NewContainer(ef.database, ef.container)
	if err != nil {
		return err
	}
	if *errorsFile != "" {
		flags := os.O_WRONLY | os.O_CREATE | os.O_TRUNC
		if _, err := os.Stat(state); state != "" && err == nil {
			flags = os.O_WRONLY | os.O_CREATE | os.O_APPEND // the earlier runs' failures stay
		}
		errFile, err := os.OpenFile(*errorsFile, flags, 0o644)
		if err != nil {
			return err
		}
		defer errFile.Close()
		opts.Errors = errFile
	}
	endBar := func(bool) {}
	switch {
	case ef.quiet:
	case isTerminal(os.Stderr):
		bar := itemBar(os.Stderr, -1, "importing")
		var mu sync.Mutex
		if path != "-" {
			go func() {
				f, err := os.Open(path)
				if err != nil {
					return
				}
				defer f.Close()
				if n, err := transfer.CountRecords(f); err == nil {
					mu.Lock()
					bar.ChangeMax64(n)
					mu.Unlock()
				}
			}()
		}
		opts.Progress = func(p transfer.Progress) {
			mu.Lock()
			_ = bar.Set64(p.Records())
			mu.Unlock()
		}
		endBar = func(complete bool) {
			mu.Lock()
			defer mu.Unlock()
			if complete {
				if n := int64(bar.State().CurrentBytes); n > 0 {
					bar.ChangeMax64(n) // the count, if it is still running
				}
				_ = bar.Finish()
			} else {
				_ = bar.Exit()
			}
		}
	default:
		size := int64(-1)
		if st, err := os.Stat(path); err == nil && path != "-" {
			size = st.Size()
		}
		opts.Progress = (&progressLog{log: stderrLog(), msg: "import progress", every: progressLogEvery, size: size}).report
	}
	var sum *transfer.Summary
	if path == "-" {
		sum, err = transfer.Import(ctx, container, os.Stdin, opts)
	} else {
		sum, err = transfer.ImportFile(ctx, container, path, state, opts)
	}
	endBar(err == nil && sum.Unfinished == 0)
	if errors.Is(err, transfer.ErrContainerNotFound) {
		return missingContainer(ctx, client, &ef, true)
	}
	if sum != nil {
		fmt.Fprintln(os.Stderr, "\nimport:", sum)
	}
	if err != nil && state != "" && errors.Is(err, context.Canceled) {
		return interruptedImport(state, "")
	}
	if err != nil && state != "" && errors.Is(err, transfer.ErrStopped) {
		return fmt.Errorf("%w: run the same command again to resume (%s)", err, state)
	}
	if err == nil && state != "" && sum.Unfinished == 0 {
		_ = os.Remove(state)
	}
	if err == nil && sum.Failed > 0 {
		msg := fmt.Sprintf("%d records failed", sum.Failed)
		if *errorsFile != "" {
			msg += " (each in " + *errorsFile + ")"
		} else {
			msg += " (--errors FILE keeps each)"
		}
		return errors.New(msg)
	}
	return err
}

// interruptedImport is the error of an import that an interrupt ended:
// with a state file, run again it resumes; without one, it starts over.
func interruptedImport(state, when string) error {
	msg := "interrupted"
	if when != "" {
		msg += " " + when
	}
	if state == "" {
		return errors.New(msg + ": run the same command again to import the file")
	}
	return fmt.Errorf("%s: run the same command again to resume (%s)", msg, state)
}

func exportCmd(args []string) error {
	fs := flag.NewFlagSet("export", flag.ContinueOnError)
	var ef endpointFlags
	ef.register(fs)
	format := fs.String("format", "jsonl", "jsonl (one item a line) or json (an array)")
	query := fs.String("query", "", "export what this query selects (whole items); every item when empty")
	out := fs.String("o", "-", "output file, written whole or not at all; - for standard output")
	resume := fs.Bool("resume", false, "record progress in FILE.export-state and, when it exists, continue after the last finished page (needs -o; the file fills as pages come)")
	setUsage(fs, "Usage: orrery export [flags]   (a container's items as JSON Lines or a JSON array)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *out == "-" && *resume {
		return errors.New("--resume needs -o FILE")
	}
	client, err := ef.client()
	if err != nil {
		return err
	}
	container, err := client.NewContainer(ef.database, ef.container)
	if err != nil {
		return err
	}
	ctx, stop := interruptible("stopping the export")
	defer stop()
	opts := transfer.ExportOptions{Format: transfer.Format(*format), Query: *query}
	switch {
	case ef.quiet:
	case isTerminal(os.Stderr):
		bar := itemBar(os.Stderr, -1, "exporting")
		opts.Progress = func(p transfer.Progress) { _ = bar.Set64(p.Written) }
		defer bar.Exit()
	default:
		opts.Progress = (&progressLog{log: stderrLog(), msg: "export progress", every: progressLogEvery}).report
	}
	var sum *transfer.Summary
	state := ""
	if *out == "-" {
		sum, err = transfer.Export(ctx, container, os.Stdout, opts)
	} else {
		if *resume {
			state = *out + ".export-state"
		}
		sum, err = transfer.ExportFile(ctx, container, *out, state, opts)
	}
	if errors.Is(err, transfer.ErrContainerNotFound) {
		return missingContainer(ctx, client, &ef, false)
	}
	if sum != nil {
		fmt.Fprintln(os.Stderr, "\nexport:", sum)
	}
	if errors.Is(err, context.Canceled) && state != "" {
		return fmt.Errorf("interrupted: run the same command again to resume (%s)", state)
	}
	if err == nil && state != "" {
		_ = os.Remove(state)
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
	_, err = d.CreateContainer(ctx, props, nil)
	if err == nil {
		return nil
	}
	if !isStatus(err, 409) {
		return fmt.Errorf("creating container %s: %w", container, err)
	}
	// It exists: its own partition key is the one that counts.
	c, err := d.NewContainer(container)
	if err != nil {
		return err
	}
	got, err := c.Read(ctx, nil)
	if err != nil {
		return fmt.Errorf("reading container %s: %w", container, err)
	}
	if paths := got.ContainerProperties.PartitionKeyDefinition.Paths; !slices.Equal(paths, []string{pkPath}) {
		fmt.Fprintf(os.Stderr, "orrery: container %s exists with partition key %s, not %s: the items go by its own\n", container, strings.Join(paths, ", "), pkPath)
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
	client, err := azcosmos.NewClientWithKey(endpoint, cred, &azcosmos.ClientOptions{ClientOptions: policy.ClientOptions{
		PerCallPolicies: []policy.Policy{transfer.PartitionKeyPolicy()}}})
	if err != nil {
		return nil, err
	}
	return transfer.Seed(ctx, client, f)
}
