package pebble

import (
	"strings"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// walZeroAhead is how far past its last write a write-ahead log file is
// extended with zeros (see walFile).
const walZeroAhead = 1 << 20

// walZeros is what walFile extends a log with; never written to.
var walZeros [64 << 10]byte

// walFS hands Pebble its write-ahead log files as walFiles; every other
// file is the wrapped file system's own.
type walFS struct{ vfs.FS }

// isWAL reports whether name is one of Pebble's write-ahead log files.
func isWAL(name string) bool { return strings.HasSuffix(name, ".log") }

func (fs walFS) Create(name string, c vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := fs.FS.Create(name, c)
	if err != nil || !isWAL(name) {
		return f, err
	}
	return &walFile{File: f}, nil
}

// ReuseForWrite hands Pebble a recycled log (an obsolete one, renamed),
// which it overwrites from the start: its size is already written.
func (fs walFS) ReuseForWrite(oldname, newname string, c vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := fs.FS.ReuseForWrite(oldname, newname, c)
	if err != nil || !isWAL(newname) {
		return f, err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	return &walFile{File: f, end: st.Size()}, nil
}

// walFile is a write-ahead log file whose size runs ahead of Pebble's
// writes: before a write would go past the file's end, the file is
// extended by walZeroAhead bytes of zeros, written (not only allocated).
//
// Why: a log's commits are made durable by fdatasync, which on ext4
// writes the file's inode too whenever the sync carries a new file size
// (or the conversion of preallocated blocks to written ones): one more
// synchronous disk write per sync, on a virtual machine one more exit to
// the host. Pebble's own preallocation keeps the file's size
// (FALLOC_FL_KEEP_SIZE), so every sync of a new log grew it. Over written
// zeros a sync carries the data alone, as it does in a log Pebble
// recycles. Measured with a loop of 3,000-byte writes each followed by
// fdatasync on ext4: 4.0 disk requests per sync appending into Pebble's
// preallocation, 3.05 over written blocks, and ~25% less CPU per sync.
//
// Durability is unchanged: every commit is still synced before it is
// acknowledged, and the size a sync makes durable covers the data it
// syncs. After a crash the log ends in zeros, which Pebble reads as the
// end of the last log, as it reads the tail of a recycled or
// preallocated one; a log it closed ends in an end-of-file record.
//
// Only Pebble's log writer goroutine writes a log (with Write, at the
// file's offset, which starts at 0), so off and end need no lock.
type walFile struct {
	vfs.File
	off int64 // where the next Write goes
	end int64 // the file's size: what Pebble wrote, then zeros
}

func (f *walFile) Write(p []byte) (int, error) {
	if need := f.off + int64(len(p)); need > f.end {
		if err := f.zeroTo(need + walZeroAhead); err != nil {
			return 0, err
		}
	}
	n, err := f.File.Write(p)
	f.off += int64(n)
	return n, err
}

// zeroTo writes zeros from the file's end up to end.
func (f *walFile) zeroTo(end int64) error {
	for f.end < end {
		n, err := f.File.WriteAt(walZeros[:min(end-f.end, int64(len(walZeros)))], f.end)
		f.end += int64(n)
		if err != nil {
			return err
		}
	}
	return nil
}
