package store

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

// TestWriteCheckpointFiles writes the checkpoint files of several task directories at once,
// over older ones in some of them: each reads back as written, and no temporary file stays.
func TestWriteCheckpointFiles(t *testing.T) {
	root := t.TempDir()
	var files []CheckpointFile
	for i := range 5 {
		dir := filepath.Join(root, fmt.Sprintf("count_%d", i))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(dir, CheckpointFileName)
		if i%2 == 0 {
			if err := WriteCheckpointFile(path, []CheckpointEntry{{Topic: "app-counts-changelog", Partition: int32(i), Offset: 1}}); err != nil {
				t.Fatal(err)
			}
		}
		files = append(files, CheckpointFile{Path: path, Entries: []CheckpointEntry{
			{Topic: "app-counts-changelog", Partition: int32(i), Offset: int64(100 + i)},
			{Topic: "app-windows-changelog", Partition: int32(i), Offset: int64(200 + i)},
		}})
	}
	if err := WriteCheckpointFiles(files); err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		got, err := ReadCheckpointFile(f.Path)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, f.Entries) {
			t.Errorf("%s: read %v, want %v", f.Path, got, f.Entries)
		}
		if _, err := os.Stat(f.Path + ".tmp"); !os.IsNotExist(err) {
			t.Errorf("%s.tmp left behind: %v", f.Path, err)
		}
	}
	bad := []CheckpointFile{{Path: filepath.Join(root, "count_0", CheckpointFileName), Entries: []CheckpointEntry{{Topic: "", Offset: 1}}}}
	if err := WriteCheckpointFiles(append(bad, files[1])); err == nil {
		t.Error("a file with an empty topic was written")
	}
}
