package main

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/orrery-db/orrery/faults"
	"github.com/orrery-db/orrery/server"
)

// faultsCmd manages a running server's fault rules through its admin API
// (/_admin/faults, master key): orrery faults add|list|clear.
func faultsCmd(args []string) error {
	if len(args) == 0 || args[0] == "help" || args[0] == "-h" || args[0] == "--help" {
		fmt.Fprint(os.Stderr, faultsUsage)
		if len(args) == 0 {
			return errors.New("faults: name a subcommand: add, list or clear")
		}
		return flag.ErrHelp
	}
	switch args[0] {
	case "add":
		return faultsAdd(args[1:])
	case "list":
		return faultsList(args[1:])
	case "clear":
		return faultsClear(args[1:])
	}
	return fmt.Errorf("faults: unknown subcommand %q: use add, list or clear", args[0])
}

const faultsUsage = `Usage:
  orrery faults add [flags]          install a fault rule (flags) or rules (--file)
  orrery faults list [flags]         the rules installed, with their hits
  orrery faults clear [flags] [ID…]  remove the rules named, or every rule

Each takes --endpoint (env ORRERY_ENDPOINT), --key (env ORRERY_KEY), --ca-cert
and --insecure. Run 'orrery faults add --help' for a rule's flags.
`

// adminFlags name the server and credentials of an admin call.
type adminFlags struct {
	endpoint, key, caCert string
	insecure              bool
}

func (f *adminFlags) register(fs *flag.FlagSet) {
	endpointFlag(fs, &f.endpoint)
	fs.StringVar(&f.key, "key", env("ORRERY_KEY", server.EmulatorKey), "the master key (env ORRERY_KEY; default: the emulator's well-known key)")
	fs.StringVar(&f.caCert, "ca-cert", "", "PEM file of a certificate to trust for https (e.g. the output of 'orrery cert')")
	fs.BoolVar(&f.insecure, "insecure", false, "do not verify the server's TLS certificate")
}

// do sends an admin call on the fault rules (link "" or "faults/{id}") and
// returns the body of a 2xx answer.
func (f *adminFlags) do(method, id string, body []byte) ([]byte, error) {
	client := http.DefaultClient
	if f.caCert != "" || f.insecure {
		tc := &tls.Config{MinVersion: tls.VersionTLS12, InsecureSkipVerify: f.insecure}
		if f.caCert != "" {
			pemBytes, err := os.ReadFile(f.caCert)
			if err != nil {
				return nil, err
			}
			pool := x509.NewCertPool()
			if !pool.AppendCertsFromPEM(pemBytes) {
				return nil, fmt.Errorf("--ca-cert: no certificate in %s", f.caCert)
			}
			tc.RootCAs = pool
		}
		transport := http.DefaultTransport.(*http.Transport).Clone()
		transport.TLSClientConfig = tc
		client = &http.Client{Transport: transport}
	}
	link, path := "", "_admin/faults"
	if id != "" {
		link, path = "faults/"+id, path+"/"+id
	}
	date := time.Now().UTC().Format(http.TimeFormat)
	auth, err := server.Sign(f.key, method, "faults", link, date)
	if err != nil {
		return nil, fmt.Errorf("--key: %w", err)
	}
	endpoint, err := endpointURL(f.endpoint)
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequest(method, endpoint+path, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("x-ms-date", date)
	req.Header.Set("Authorization", auth)
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode/100 != 2 {
		var e struct{ Message string }
		if json.Unmarshal(out, &e) == nil && e.Message != "" {
			msg, _, _ := strings.Cut(e.Message, "\r\n")
			return nil, fmt.Errorf("%s: %s", resp.Status, msg)
		}
		return nil, fmt.Errorf("%s: %s", resp.Status, out)
	}
	return out, nil
}

// listFlag collects comma-separated or repeated values.
type listFlag []string

func (l *listFlag) String() string { return strings.Join(*l, ",") }
func (l *listFlag) Set(v string) error {
	*l = append(*l, splitList(v)...)
	return nil
}

// durationFlag is a faults.Duration flag.
type durationFlag struct{ d *faults.Duration }

func (f durationFlag) String() string {
	if f.d == nil || *f.d == 0 {
		return ""
	}
	return time.Duration(*f.d).String()
}
func (f durationFlag) Set(v string) error {
	d, err := time.ParseDuration(v)
	if err != nil {
		return err
	}
	*f.d = faults.Duration(d)
	return nil
}

func faultsAdd(args []string) error {
	fs := flag.NewFlagSet("faults add", flag.ContinueOnError)
	var af adminFlags
	af.register(fs)
	setUsage(fs, "Usage: orrery faults add [flags]   (a rule from the flags, or rules from --file)")
	var r faults.Rule
	var ops listFlag
	file := fs.String("file", "", "a JSON file of rules (an array, one rule, or {\"rules\": [...]}) instead of the flags below")
	typ := fs.String("type", "", "what the rule does: TooManyRequests, Timeout, ServiceUnavailable, InternalServerError, RetryWith, PartitionIsGone, PartitionIsSplitting, PartitionIsMigrating, ReadSessionNotAvailable, ResponseDelay, ConnectionReset, AppliedThenLost, LostBeforeApply")
	fs.StringVar(&r.ID, "id", "", "the rule's id (default: made up)")
	fs.Var(&ops, "operations", "operation kinds it applies to, comma-separated (ReadItem, CreateItem, UpsertItem, ReplaceItem, PatchItem, DeleteItem, QueryItem, BatchItem, ChangeFeedItem, ExecuteStoredProcedure, ...); default all")
	fs.StringVar(&r.Condition.Database, "database", "", "only requests to this database")
	fs.StringVar(&r.Condition.Container, "container", "", "only requests to this container")
	pk := fs.String("partition-key", "", `only requests to this logical partition, as JSON (["alice"])`)
	fs.StringVar(&r.Condition.PartitionKeyRangeID, "range", "", "only requests to this partition key range")
	fs.StringVar(&r.Condition.ClientIP, "client-ip", "", "only requests from this address or network (CIDR)")
	fs.StringVar(&r.Condition.UserAgent, "user-agent", "", "only requests whose User-Agent contains this (azsdk-js, azsdk-python, azsdk-go)")
	fs.StringVar(&r.Condition.User, "user", "", "only requests signed with a resource token of this user")
	fs.Int64Var(&r.Times, "times", 0, "fault this many requests at most (0: no limit)")
	fs.Float64Var(&r.Probability, "probability", 0, "fault a matching request with this probability (0 < p <= 1; default 1)")
	fs.Var(durationFlag{&r.Result.Delay}, "delay", "wait this long before the result (ResponseDelay: before serving)")
	fs.Var(durationFlag{&r.Result.RetryAfter}, "retry-after", "x-ms-retry-after-ms of a TooManyRequests answer (default 100ms)")
	fs.StringVar(&r.Result.Lost, "lost", "", "how AppliedThenLost and LostBeforeApply lose the reply: reset (default), Timeout (408) or ServiceUnavailable (503)")
	fs.Var(durationFlag{&r.StartAfter}, "start-after", "fire only from this long after now")
	fs.Var(durationFlag{&r.For}, "for", "fire only for this long (from now, or from --start-after)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("faults add: unexpected argument %q", fs.Arg(0))
	}
	var body []byte
	switch {
	case *file != "" && *typ != "":
		return errors.New("faults add: --file and --type exclude each other")
	case *file != "":
		rules, err := faults.LoadFile(*file)
		if err != nil {
			return err
		}
		if body, err = json.Marshal(rules); err != nil {
			return err
		}
	case *typ == "":
		return errors.New("faults add: give --type (or --file)")
	default:
		r.Result.Type = faults.Type(*typ)
		r.Condition.Operations = ops
		if *pk != "" {
			r.Condition.PartitionKey = json.RawMessage(*pk)
			if !json.Valid(r.Condition.PartitionKey) {
				return fmt.Errorf("--partition-key %s is not JSON: give it as the header carries it, e.g. [\"alice\"]", *pk)
			}
		}
		var err error
		if body, err = json.Marshal(r); err != nil {
			return err
		}
	}
	out, err := af.do(http.MethodPost, "", body)
	if err != nil {
		return err
	}
	var added struct{ Rules []faults.Rule }
	if err := json.Unmarshal(out, &added); err != nil {
		return err
	}
	for _, r := range added.Rules {
		fmt.Println("added", r.String())
	}
	return nil
}

func faultsList(args []string) error {
	fs := flag.NewFlagSet("faults list", flag.ContinueOnError)
	var af adminFlags
	af.register(fs)
	setUsage(fs, "Usage: orrery faults list [flags]   (the rules installed, with their hits)")
	asJSON := fs.Bool("json", false, "print the rules as the API returns them")
	if err := fs.Parse(args); err != nil {
		return err
	}
	out, err := af.do(http.MethodGet, "", nil)
	if err != nil {
		return err
	}
	if *asJSON {
		_, err := os.Stdout.Write(append(out, '\n'))
		return err
	}
	var list struct{ Rules []faults.Status }
	if err := json.Unmarshal(out, &list); err != nil {
		return err
	}
	if len(list.Rules) == 0 {
		fmt.Println("no fault rules")
		return nil
	}
	tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tHITS\tRULE")
	for _, s := range list.Rules {
		desc := s.Rule.String()
		desc = strings.TrimPrefix(desc, s.ID+": ")
		fmt.Fprintf(tw, "%s\t%d\t%s\n", s.ID, s.Hits, desc)
	}
	return tw.Flush()
}

func faultsClear(args []string) error {
	fs := flag.NewFlagSet("faults clear", flag.ContinueOnError)
	var af adminFlags
	af.register(fs)
	setUsage(fs, "Usage: orrery faults clear [flags] [ID…]   (the rules named, or every rule)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() == 0 {
		out, err := af.do(http.MethodDelete, "", nil)
		if err != nil {
			return err
		}
		var res struct{ Removed int }
		if err := json.Unmarshal(out, &res); err != nil {
			return err
		}
		fmt.Printf("removed %d rule(s)\n", res.Removed)
		return nil
	}
	for _, id := range fs.Args() {
		if _, err := af.do(http.MethodDelete, id, nil); err != nil {
			return fmt.Errorf("rule %s: %w", id, err)
		}
		fmt.Println("removed", id)
	}
	return nil
}

// loadFaults reads the rules of serve --faults FILE, which the server
// installs before it serves; none without a file.
func loadFaults(file string) ([]faults.Rule, error) {
	if file == "" {
		return nil, nil
	}
	rules, err := faults.LoadFile(file)
	if err != nil {
		return nil, fmt.Errorf("--faults: %w", err)
	}
	return rules, nil
}
