package store

import (
	"bufio"
	"sync"

	"github.com/cockroachdb/pebble/v2/objstorage"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// loadWriteBuffer is the buffer between a run's table and its file. Pebble's own writable
// buffers 4 KiB, a write system call a block: a tenth of the CPU of writing a run went to
// those calls (BenchmarkLoaderPartitions, uniform keys; a fortieth with this buffer).
const loadWriteBuffer = 256 << 10

// loadWriters holds the buffers of the point tables being written, reused run after run: one
// for each run in its CPU part (as many as the loads' semaphore lets run at once) or in its
// table's last flush and sync.
var loadWriters = sync.Pool{New: func() any { return bufio.NewWriterSize(nil, loadWriteBuffer) }}

// loadWritable is an objstorage.Writable that writes a file through a buffer of
// loadWriteBuffer bytes and syncs it at Finish, as Pebble's does with a smaller one.
type loadWritable struct {
	f  vfs.File
	bw *bufio.Writer
}

var _ objstorage.Writable = (*loadWritable)(nil)

func newLoadWritable(f vfs.File) *loadWritable {
	bw := loadWriters.Get().(*bufio.Writer)
	bw.Reset(f)
	return &loadWritable{f: f, bw: bw}
}

func (w *loadWritable) Write(p []byte) error {
	_, err := w.bw.Write(p)
	return err
}

func (w *loadWritable) Finish() error {
	err := w.bw.Flush()
	if err == nil {
		err = w.f.Sync()
	}
	if cerr := w.f.Close(); err == nil {
		err = cerr
	}
	w.release()
	return err
}

func (w *loadWritable) Abort() {
	_ = w.f.Close()
	w.release()
}

// release gives the buffer back, holding no file.
func (w *loadWritable) release() {
	w.bw.Reset(nil)
	loadWriters.Put(w.bw)
	w.bw, w.f = nil, nil
}
