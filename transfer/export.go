package transfer

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/data/azcosmos"
)

// Format is the layout of an export file.
type Format string

const (
	// JSONLines writes one item a line.
	JSONLines Format = "jsonl"
	// JSONArray writes one JSON array of items.
	JSONArray Format = "json"
)

// ExportOptions configure Export and ExportFile.
type ExportOptions struct {
	// Format is JSONLines when empty.
	Format Format
	// Query selects what to export; every item (SELECT * FROM c) when empty.
	// It must return whole items (their id and system properties).
	Query string
	// PageSize is the number of items asked for in one page; 1,000 when zero.
	PageSize int32
	// Progress, when set, is called after every page with the count so far.
	Progress func(Progress)
}

// exportState is the resumable export's state file: the output file holds
// Offset bytes of finished pages, and the query resumes at Continuation.
type exportState struct {
	Offset       int64  `json:"offset"`
	Written      int64  `json:"written"`
	Continuation string `json:"continuation,omitempty"`
	Finished     bool   `json:"finished"`
}

// Export writes every item the query selects from the container to w. A
// container that does not exist is an error wrapping ErrContainerNotFound,
// before anything is written.
func Export(ctx context.Context, c *azcosmos.ContainerClient, w io.Writer, opts ExportOptions) (*Summary, error) {
	if err := checkContainer(ctx, c); err != nil {
		return nil, err
	}
	return export(ctx, c, w, exportState{}, opts, nil)
}

// checkContainer reads the container: ErrContainerNotFound when missing.
func checkContainer(ctx context.Context, c *azcosmos.ContainerClient) error {
	if _, err := c.Read(ctx, nil); err != nil {
		if isStatus(err, 404) {
			return fmt.Errorf("container %s: %w", c.ID(), ErrContainerNotFound)
		}
		return fmt.Errorf("reading the container %s: %w", c.ID(), err)
	}
	return nil
}

// ExportFile exports into the file at path. The file appears whole or not
// at all: the items go to a temporary file beside it, renamed to path once
// the export is complete. With stateFile set the export is resumable
// instead: the file fills as pages come, and after an interruption the same
// call truncates it to the last finished page and continues from there.
func ExportFile(ctx context.Context, c *azcosmos.ContainerClient, path, stateFile string, opts ExportOptions) (*Summary, error) {
	var st exportState
	if stateFile != "" {
		var err error
		if st, _, err = readState[exportState](stateFile); err != nil {
			return nil, err
		}
		if st.Finished {
			return &Summary{Earlier: Counts{Written: st.Written}}, nil
		}
	}
	if err := checkContainer(ctx, c); err != nil {
		return nil, err
	}
	if stateFile == "" {
		return exportWhole(ctx, c, path, opts)
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if err := f.Truncate(st.Offset); err != nil {
		return nil, err
	}
	if _, err := f.Seek(st.Offset, io.SeekStart); err != nil {
		return nil, err
	}
	save := func(s exportState) error {
		if err := f.Sync(); err != nil {
			return err
		}
		if stateFile == "" {
			return nil
		}
		return writeState(stateFile, s)
	}
	sum, err := export(ctx, c, f, st, opts, save)
	if err != nil {
		return sum, err
	}
	return sum, f.Close()
}

// exportWhole exports into a temporary file and renames it to path when
// complete; on failure it leaves nothing.
func exportWhole(ctx context.Context, c *azcosmos.ContainerClient, path string, opts ExportOptions) (*Summary, error) {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".partial-*")
	if err != nil {
		return nil, err
	}
	done := false
	defer func() {
		if !done {
			f.Close()
			os.Remove(f.Name())
		}
	}()
	sum, err := export(ctx, c, f, exportState{}, opts, nil)
	if err != nil {
		return sum, err
	}
	if err := f.Chmod(0o644); err != nil {
		return sum, err
	}
	if err := f.Sync(); err != nil {
		return sum, err
	}
	if err := f.Close(); err != nil {
		return sum, err
	}
	if err := os.Rename(f.Name(), path); err != nil {
		return sum, err
	}
	done = true
	return sum, nil
}

// export runs the query from the state's continuation, writing each page to
// w and calling save (when set) after each page is flushed.
func export(ctx context.Context, c *azcosmos.ContainerClient, w io.Writer, st exportState, opts ExportOptions, save func(exportState) error) (*Summary, error) {
	start := time.Now()
	if opts.Format == "" {
		opts.Format = JSONLines
	}
	if opts.Format != JSONLines && opts.Format != JSONArray {
		return nil, fmt.Errorf("unknown export format %q (jsonl or json)", opts.Format)
	}
	if opts.Query == "" {
		opts.Query = "SELECT * FROM c"
	}
	if opts.PageSize == 0 {
		opts.PageSize = 1000
	}
	bw := bufio.NewWriterSize(w, 1<<20)
	sum := &Summary{Earlier: Counts{Written: st.Written}}
	if opts.Format == JSONArray && st.Offset == 0 {
		if _, err := bw.WriteString("["); err != nil {
			return sum, err
		}
	}
	qo := &azcosmos.QueryOptions{PageSizeHint: opts.PageSize}
	if st.Continuation != "" {
		tok := st.Continuation
		qo.ContinuationToken = &tok
	}
	pager := c.NewQueryItemsPager(opts.Query, azcosmos.NewPartitionKey(), qo)
	for pager.More() {
		page, err := pager.NextPage(ctx)
		if err != nil {
			sum.Elapsed = time.Since(start)
			return sum, fmt.Errorf("reading the container: %w", err)
		}
		for _, item := range page.Items {
			clean, err := stripSystemProperties(item)
			if err != nil {
				return sum, fmt.Errorf("an item the service returned: %w", err)
			}
			if opts.Format == JSONArray {
				if st.Written > 0 {
					bw.WriteString(",\n")
				} else {
					bw.WriteString("\n")
				}
			}
			bw.Write(clean)
			if opts.Format == JSONLines {
				bw.WriteByte('\n')
			}
			st.Written++
			sum.Written++
		}
		if err := bw.Flush(); err != nil {
			return sum, err
		}
		if page.ContinuationToken != nil {
			st.Continuation = *page.ContinuationToken
		} else {
			st.Continuation = ""
		}
		if save != nil {
			if err := savePage(w, &st, save); err != nil {
				return sum, err
			}
		}
		if opts.Progress != nil {
			opts.Progress(Progress{Written: st.Written})
		}
	}
	if opts.Format == JSONArray {
		if st.Written > 0 {
			bw.WriteString("\n")
		}
		bw.WriteString("]\n")
	}
	if err := bw.Flush(); err != nil {
		return sum, err
	}
	st.Finished = true
	if save != nil {
		if err := savePage(w, &st, save); err != nil {
			return sum, err
		}
	}
	sum.Elapsed = time.Since(start)
	return sum, nil
}

// savePage records the file's current position in the state and saves it.
func savePage(w io.Writer, st *exportState, save func(exportState) error) error {
	s, ok := w.(io.Seeker)
	if !ok {
		return errors.New("a resumable export needs a file")
	}
	off, err := s.Seek(0, io.SeekCurrent)
	if err != nil {
		return err
	}
	st.Offset = off
	return save(*st)
}
