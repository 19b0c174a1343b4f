package wit

import (
	"crypto/sha256"
	"encoding/hex"
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "write wit.sha256 (scripts/generate.sh does, after regenerating)")

// witDir is the repository's wit/, from plugins/go/internal/wit.
const witDir = "../../../../wit"

var (
	comment    = regexp.MustCompile(`//[^\n]*`)
	whitespace = regexp.MustCompile(`\s+`)
)

// digest is the sha256 of the WIT package's files (by name), without comments and with
// whitespace collapsed: what the bindings depend on.
func digest(t *testing.T) string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(witDir, "*.wit"))
	if err != nil || len(files) == 0 {
		t.Skipf("no WIT files in %s (not in a kubewasm checkout): %v", witDir, err)
	}
	sort.Strings(files)
	h := sha256.New()
	for _, f := range files {
		text, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		body := strings.TrimSpace(whitespace.ReplaceAllString(comment.ReplaceAllString(string(text), ""), " "))
		h.Write([]byte(filepath.Base(f) + "\x00" + body + "\x00"))
	}
	return hex.EncodeToString(h.Sum(nil))
}

func TestBindingsMatchTheWIT(t *testing.T) {
	got := digest(t)
	if *update {
		if err := os.WriteFile("wit.sha256", []byte(got+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	recorded, err := os.ReadFile("wit.sha256")
	if err != nil {
		t.Fatal(err)
	}
	if strings.TrimSpace(string(recorded)) != got {
		t.Fatalf("the WIT in %s changed since the Go bindings were generated: run plugins/go/scripts/generate.sh (needs wit-bindgen-cli 0.63.0, see the script)", witDir)
	}
}
