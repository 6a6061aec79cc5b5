// Command tickets is Cosmic Ticks, the seat-selling reference app: a site
// that sells concert seats and shows, scenario by scenario, how concurrent
// buyers break a naive implementation and which coordination tool fixes it.
//
//	go run ./examples/tickets                    # embedded Orrery, http://localhost:8080
//	go run ./examples/tickets --endpoint URL --key KEY   # any Cosmos DB endpoint
//	go run ./examples/tickets --storm            # 1,000 buyers for 100 seats, then exit
//
// Everything talks to Cosmos through the azcosmos SDK; only embedded.go
// imports the server, to start one in process when no endpoint is given.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/data/azcosmos"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "tickets:", err)
		os.Exit(1)
	}
}

// run parses the flags, connects to Cosmos (starting an embedded Orrery when
// no endpoint is given), and serves the site or runs the storm.
func run(args []string) error {
	fs := flag.NewFlagSet("tickets", flag.ContinueOnError)
	addr := fs.String("addr", ":8080", "address the site listens on")
	endpoint := fs.String("endpoint", os.Getenv("COSMOS_ENDPOINT"), "Cosmos DB endpoint (env COSMOS_ENDPOINT); empty starts an embedded Orrery")
	key := fs.String("key", os.Getenv("COSMOS_KEY"), "Cosmos DB account key (env COSMOS_KEY)")
	storm := fs.Bool("storm", false, "run the storm (buyers released at once on 100 seats) under each safe strategy, print the report and exit")
	buyers := fs.Int("storm-buyers", 1000, "buyers in the storm")
	if err := fs.Parse(args); err != nil {
		return err
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()

	if *endpoint == "" {
		emb, err := startEmbedded(ctx)
		if err != nil {
			return fmt.Errorf("starting the embedded Orrery: %w", err)
		}
		defer emb.close()
		*endpoint, *key = emb.endpoint, emb.key
		log.Info("embedded Orrery started", "endpoint", emb.endpoint)
	} else if *key == "" {
		return fmt.Errorf("--endpoint %s needs the account's key: pass --key KEY or set COSMOS_KEY (in the Azure portal: the account's Keys page, primary or secondary key; the app creates its database and containers, so not a read-only key). Without --endpoint the app starts its own Orrery and needs no key", *endpoint)
	}
	if _, err := newClient(*endpoint, *key, ""); err != nil {
		return err
	}
	setup, cancel := context.WithTimeout(ctx, setupTimeout)
	defer cancel()
	app, err := newApp(setup, *endpoint, *key, log)
	if err != nil {
		return explainSetup(err, *endpoint)
	}
	defer app.Close()
	if *storm {
		return stormAll(ctx, app.shop, *buyers, os.Stdout)
	}

	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return err
	}
	log.Info("Cosmic Ticks is open", "url", "http://"+displayAddr(ln.Addr()))
	return serve(ctx, ln, app.routes())
}

// setupTimeout bounds the start: creating the database and containers.
const setupTimeout = time.Minute

// newClient connects the SDK to an endpoint with a key; agent, when not
// empty, is added to its requests' user agent.
func newClient(endpoint, key, agent string) (*azcosmos.Client, error) {
	cred, err := azcosmos.NewKeyCredential(key)
	if err != nil {
		return nil, fmt.Errorf("--key is not an account key (a key is base64, 88 characters, from the account's Keys page): %v", err)
	}
	u, err := url.Parse(endpoint)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return nil, fmt.Errorf("--endpoint %q is not a URL like https://ACCOUNT.documents.azure.com:443/", endpoint)
	}
	return azcosmos.NewClientWithKey(endpoint, cred, clientOptions(agent))
}

// explainSetup says what a failed start means and what to change, instead
// of the SDK's dump of the request and response.
func explainSetup(err error, endpoint string) error {
	var re *azcore.ResponseError
	var ne net.Error
	switch {
	case errors.As(err, &re) && re.StatusCode == http.StatusUnauthorized:
		return fmt.Errorf("%s refused the key (401 Unauthorized): pass this account's primary or secondary key with --key (or COSMOS_KEY); a key of another account, or one regenerated since, is refused", endpoint)
	case errors.As(err, &re) && re.StatusCode == http.StatusForbidden:
		return fmt.Errorf("%s refused access (403 Forbidden, %s): the app creates its database and containers, so it needs a read-write key, and the account's firewall must admit this machine", endpoint, re.ErrorCode)
	case errors.As(err, &re):
		return fmt.Errorf("setting up the database at %s: %s (%s)", endpoint, plainError(err), re.ErrorCode)
	case errors.Is(err, context.DeadlineExceeded):
		return fmt.Errorf("%s did not answer within %v: check --endpoint and that the account is reachable from here", endpoint, setupTimeout)
	case errors.As(err, &ne):
		return fmt.Errorf("cannot reach %s (%v): check --endpoint, which looks like https://ACCOUNT.documents.azure.com:443/", endpoint, err)
	}
	return fmt.Errorf("setting up the database at %s: %w", endpoint, err)
}

// serve runs the site until ctx ends, then lets requests in flight finish.
func serve(ctx context.Context, ln net.Listener, h http.Handler) error {
	hs := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	served := make(chan error, 1)
	go func() { served <- hs.Serve(ln) }()
	select {
	case err := <-served:
		return err
	case <-ctx.Done():
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := hs.Shutdown(sctx); err != nil && !errors.Is(err, context.DeadlineExceeded) {
			return err
		}
		return nil
	}
}

// displayAddr turns a listening address into one a browser can open.
func displayAddr(a net.Addr) string {
	tcp, ok := a.(*net.TCPAddr)
	if ok && (tcp.IP.IsUnspecified() || tcp.IP == nil) {
		return fmt.Sprintf("localhost:%d", tcp.Port)
	}
	return a.String()
}
