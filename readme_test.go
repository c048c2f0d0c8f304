package rlock_test

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// snippetDocs are the Markdown files whose ```go blocks must compile.
var snippetDocs = []string{"README.md", "docs/*.md"}

// snippetSkips are Markdown files whose ```go blocks are not meant to
// compile, and why.
var snippetSkips = map[string]string{
	"docs/rwlock-design.md": "a design proposal: declarations without bodies, not code to paste",
}

// snippetPackages are the packages a fragment may use without importing
// them, by the name it uses.
var snippetPackages = map[string]string{
	"context":   "context",
	"errors":    "errors",
	"fmt":       "fmt",
	"log":       "log",
	"slog":      "log/slog",
	"sql":       "database/sql",
	"time":      "time",
	"redis":     "github.com/redis/go-redis/v9",
	"rlock":     "github.com/rlock-go/rlock",
	"reentrant": "github.com/rlock-go/rlock/reentrant",
	"fair":      "github.com/rlock-go/rlock/fair",
	"rwlock":    "github.com/rlock-go/rlock/rwlock",
	"multilock": "github.com/rlock-go/rlock/multilock",
	"redlock":   "github.com/rlock-go/rlock/redlock",
	"semaphore": "github.com/rlock-go/rlock/semaphore",
	"latch":     "github.com/rlock-go/rlock/latch",
}

// A snippet is one ```go block of a Markdown file.
type snippet struct {
	file string // relative to the module root, slash-separated
	line int    // of the block's first line of code
	code string
}

// complete reports whether s is a file of its own: it starts with a
// package clause (after any comments).
func (s snippet) complete() bool {
	_, err := parser.ParseFile(token.NewFileSet(), "", s.code, parser.PackageClauseOnly)
	return err == nil
}

func (s snippet) String() string { return fmt.Sprintf("%s:%d", s.file, s.line) }

// TestReadmeSnippetsCompile checks that every ```go block of the README and
// the docs compiles against the module as it is: a block that starts with
// "package" as a program of its own, any other as the declarations of a
// file (fragmentFile): what a user pastes, with nothing in scope but the
// imports it names or implies. All of them are vetted by one go vet run on
// packages generated in a directory under the module root.
func TestReadmeSnippetsCompile(t *testing.T) {
	goCmd, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command in PATH: the README's snippets are not compiled here (CI compiles them)")
	}
	snippets := collectSnippets(t)
	dir, err := os.MkdirTemp(".", "_readme-snippets-") // "_": never matched by ./...
	if errors.Is(err, fs.ErrPermission) {
		t.Skipf("the module root is read-only (%v): the README's snippets are not compiled here", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	generated := make([]string, len(snippets))
	var pkgs []string
	for i, s := range snippets {
		pkg := "./" + filepath.ToSlash(filepath.Join(dir, fmt.Sprintf("s%02d", i)))
		if generated[i], err = writeSnippet(t, pkg, s); err != nil {
			t.Errorf("%s: the ```go block does not parse: %v", s, err)
			continue
		}
		pkgs = append(pkgs, pkg)
	}
	if len(pkgs) == 0 {
		return
	}
	out, err := exec.Command(goCmd, append([]string{"vet"}, pkgs...)...).CombinedOutput()
	if err == nil {
		t.Logf("%d snippets compile", len(pkgs))
		return
	}
	reportSnippetFailures(t, snippets, generated, string(out))
}

// collectSnippets reads the ```go blocks of snippetDocs, failing if the
// README has none (the extraction would be broken).
func collectSnippets(t *testing.T) []snippet {
	t.Helper()
	var files []string
	for _, pattern := range snippetDocs {
		m, err := filepath.Glob(pattern)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, m...)
	}
	var all []snippet
	for _, f := range files {
		f = filepath.ToSlash(f)
		if why, ok := snippetSkips[f]; ok {
			t.Logf("%s skipped: %s", f, why)
			continue
		}
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, goBlocks(f, string(data))...)
	}
	if !slices.ContainsFunc(all, func(s snippet) bool { return s.file == "README.md" && s.complete() }) {
		t.Fatalf("no complete ```go program found in README.md (of %d blocks): the extraction is broken", len(all))
	}
	return all
}

// goBlocks returns the ```go fenced blocks of one Markdown file.
func goBlocks(file, text string) []snippet {
	var out []snippet
	var cur *snippet
	var indent string
	sc := bufio.NewScanner(strings.NewReader(text))
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		trimmed := strings.TrimSpace(line)
		switch {
		case cur == nil && trimmed == "```go":
			indent = line[:len(line)-len(strings.TrimLeft(line, " \t"))]
			cur = &snippet{file: file, line: n + 1}
		case cur != nil && trimmed == "```":
			out = append(out, *cur)
			cur = nil
		case cur != nil:
			cur.code += strings.TrimPrefix(line, indent) + "\n"
		}
	}
	return out
}

// writeSnippet writes one snippet as a package in dir and returns the
// generated source of its snippet file, or the error of a fragment that
// does not parse.
func writeSnippet(t *testing.T, dir string, s snippet) (string, error) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	abs, err := filepath.Abs(s.file)
	if err != nil {
		t.Fatal(err)
	}
	var src string
	if s.complete() {
		src = fmt.Sprintf("//line %s:%d\n%s", abs, s.line, s.code)
	} else if src, err = fragmentFile(abs, s); err != nil {
		return "", err
	}
	writeFile(t, filepath.Join(dir, "snippet.go"), src)
	return src, nil
}

func writeFile(t *testing.T, name, content string) {
	t.Helper()
	if err := os.WriteFile(name, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// placeholder matches a "..." standing for a statement ("{ ... }", or alone
// on its line); never a variadic call's "xs...".
var placeholder = regexp.MustCompile(`(?m)(^|\{)([ \t]*)\.\.\.([ \t]*)(\}|$)`)

// fragmentFile builds the file that compiles fragment s, a block of
// declarations as a user pastes it into a file of theirs: functions (such
// as func main(), or one naming the parameters its code uses) and their
// imports. Its imports are kept, the packages it uses by name without
// importing them are imported from snippetPackages, and its "..."
// statements become panics. Nothing else is added: a block of bare
// statements does not compile, nor does one that declares a variable it
// never uses.
func fragmentFile(abs string, s snippet) (string, error) {
	imports, body := hoistImports(s)
	body = placeholder.ReplaceAllString(body, `${1}${2}panic("...")${3}${4}`)
	used, err := fragmentUses(fmt.Sprintf("//line %s:%d\n%s", s.file, s.line, body))
	if err != nil {
		return "", err
	}
	imports = append(missingImports(imports, used), imports...)
	var b strings.Builder
	b.WriteString("package snippet\n\nimport (\n")
	for _, imp := range imports {
		if imp.line > 0 {
			fmt.Fprintf(&b, "//line %s:%d\n", abs, imp.line)
		}
		fmt.Fprintf(&b, "\t%s\n", imp.spec)
	}
	fmt.Fprintf(&b, ")\n\n//line %s:%d\n%s", abs, s.line, body)
	return b.String(), nil
}

// An importSpec is one import of a fragment, at its line in the Markdown
// file (0 for one added from snippetPackages).
type importSpec struct {
	spec string
	line int
}

// hoistImports splits the import declarations at the top of a fragment
// from the rest, blanking them in the body so line numbers stay.
func hoistImports(s snippet) (imports []importSpec, body string) {
	lines := strings.Split(s.code, "\n")
	inBlock := false
	for i, line := range lines {
		trimmed := strings.TrimSpace(line)
		switch {
		case inBlock && trimmed == ")":
			inBlock = false
		case inBlock:
			if trimmed != "" {
				imports = append(imports, importSpec{trimmed, s.line + i})
			}
		case trimmed == "import (":
			inBlock = true
		case strings.HasPrefix(trimmed, "import "):
			imports = append(imports, importSpec{strings.TrimSpace(strings.TrimPrefix(trimmed, "import ")), s.line + i})
		case trimmed == "" || strings.HasPrefix(trimmed, "//"):
			continue
		default:
			return imports, strings.Join(lines[i:], "\n")
		}
		lines[i] = ""
	}
	return imports, strings.Join(lines, "\n")
}

// fragmentUses parses a fragment's body as the declarations of a file
// and returns the identifiers it uses as a selector's operand. A body of
// statements, not declarations, is an error that says how to write it.
func fragmentUses(body string) (map[string]bool, error) {
	f, err := parser.ParseFile(token.NewFileSet(), "fragment.go", "package p\n"+body, 0)
	if err != nil {
		return nil, fmt.Errorf("%w (a ```go block is a program, or declarations such as func main() or a function with the parameters its code uses, never bare statements)", err)
	}
	used := map[string]bool{}
	ast.Inspect(f, func(n ast.Node) bool {
		if sel, ok := n.(*ast.SelectorExpr); ok {
			if id, ok := sel.X.(*ast.Ident); ok {
				used[id.Name] = true
			}
		}
		return true
	})
	return used, nil
}

// missingImports returns the import specs, from snippetPackages, of the
// packages a fragment uses by name without importing them.
func missingImports(imports []importSpec, used map[string]bool) []importSpec {
	have := map[string]bool{}
	for _, imp := range imports {
		fields := strings.Fields(imp.spec)
		p, _ := strconv.Unquote(fields[len(fields)-1])
		name := path.Base(p)
		if len(fields) == 2 {
			name = fields[0]
		} else if strings.HasPrefix(name, "v") && strings.Contains(p, "go-redis") {
			name = "redis"
		}
		have[name] = true
	}
	var out []importSpec
	for name, p := range snippetPackages {
		if used[name] && !have[name] {
			out = append(out, importSpec{spec: strconv.Quote(p)})
		}
	}
	slices.SortFunc(out, func(a, b importSpec) int { return strings.Compare(a.spec, b.spec) })
	return out
}

// reportSnippetFailures attributes go vet's output to the snippets: a line
// that starts with a position by that position (in the Markdown file, or in
// a generated file), any other line to the package of the "# <package>"
// header before it.
func reportSnippetFailures(t *testing.T, snippets []snippet, generated []string, out string) {
	t.Helper()
	root, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	out = strings.ReplaceAll(out, root+string(filepath.Separator), "")
	msgs := make([]strings.Builder, len(snippets))
	var unattributed strings.Builder
	cur := -1
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		if i, header := snippetOf(snippets, line); i >= 0 {
			cur = i
			if header {
				continue
			}
		}
		if cur < 0 {
			fmt.Fprintln(&unattributed, line)
		} else {
			fmt.Fprintln(&msgs[cur], line)
		}
	}
	attributed := false
	for i, s := range snippets {
		if msgs[i].Len() == 0 {
			continue
		}
		attributed = true
		t.Errorf("%s: the ```go block does not compile:\n%s", s, msgs[i].String())
		if !s.complete() {
			t.Logf("%s: generated copy:\n%s", s, numbered(generated[i]))
		}
	}
	if unattributed.Len() > 0 || !attributed {
		t.Errorf("go vet failed:\n%s", out)
	}
}

var (
	vetHeader   = regexp.MustCompile(`^# \[?\S*/_readme-snippets-[^/]*/s(\d+)\]?$`)
	vetPosition = regexp.MustCompile(`^(?:vet: )?(?:\./)?([^\s:]+):(\d+):`)
	genFile     = regexp.MustCompile(`_readme-snippets-[^/]*/s(\d+)/`)
)

// snippetOf returns the index of the snippet a line of go vet's output is
// about (-1 if it does not say), and whether it is a package header.
func snippetOf(snippets []snippet, line string) (i int, header bool) {
	if m := vetHeader.FindStringSubmatch(line); m != nil {
		i, _ := strconv.Atoi(m[1])
		return i, true
	}
	m := vetPosition.FindStringSubmatch(line)
	if m == nil {
		return -1, false
	}
	file := filepath.ToSlash(m[1])
	if g := genFile.FindStringSubmatch(file); g != nil {
		i, _ := strconv.Atoi(g[1])
		return i, false
	}
	n, _ := strconv.Atoi(m[2])
	for i, s := range snippets {
		if file == s.file && n >= s.line && n < s.line+strings.Count(s.code, "\n") {
			return i, false
		}
	}
	return -1, false
}

func numbered(src string) string {
	var b bytes.Buffer
	for i, line := range strings.Split(src, "\n") {
		fmt.Fprintf(&b, "%4d  %s\n", i+1, line)
	}
	return b.String()
}

// readmeMaxBytes is the README's budget: one page a newcomer reads in five
// minutes. What does not fit belongs in docs/ or the package docs.
const readmeMaxBytes = 20 << 10

// TestReadmeSize fails when the README grows past readmeMaxBytes.
func TestReadmeSize(t *testing.T) {
	fi, err := os.Stat("README.md")
	if err != nil {
		t.Fatal(err)
	}
	if fi.Size() > readmeMaxBytes {
		t.Errorf("README.md is %d bytes, over its budget of %d: move the detail to docs/ or the package docs", fi.Size(), readmeMaxBytes)
	}
}

// TestReadmeTestCommandIsCI checks that .ci/run runs the test command the
// README gives, byte for byte, so the README's promise is what CI checks.
func TestReadmeTestCommandIsCI(t *testing.T) {
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile("(?m)^(go test [^#\n]*?)\\s*#").FindSubmatch(readme)
	if m == nil {
		t.Fatal("README.md gives no `go test ...` command in a shell block")
	}
	ci, err := os.ReadFile(".ci/run")
	if err != nil {
		t.Skipf("no .ci/run here: %v", err)
	}
	cmd := string(m[1])
	if !regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(cmd) + `$`).Match(ci) {
		t.Errorf(".ci/run does not run the README's test command %q on a line of its own", cmd)
	}
}

// TestReadmeLinks checks that every relative link of the README and the
// docs names a file that exists.
func TestReadmeLinks(t *testing.T) {
	files := []string{"README.md", "extra/rlockotel/README.md"}
	docs, _ := filepath.Glob("docs/*.md")
	link := regexp.MustCompile(`\]\(([^)#\s]+)(#[^)]*)?\)`)
	for _, f := range append(files, docs...) {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range link.FindAllStringSubmatch(string(data), -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			if _, err := os.Stat(filepath.Join(filepath.Dir(f), target)); err != nil {
				t.Errorf("%s: link to %s: %v", f, target, err)
			}
		}
	}
}
