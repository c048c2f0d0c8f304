package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/rlock-go/rlock/internal/redistest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func runCLI(args ...string) (code int, stdout, stderr string) {
	var out, errb bytes.Buffer
	code = run(context.Background(), args, &out, &errb)
	return code, out.String(), errb.String()
}

func TestDemo(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		args := []string{"demo", "--progress=false", "--services=2", "--workers=4", "--stock=30", "--work=1ms"}
		if b.IsReal() {
			args = append(args, "--redis=redis://"+b.Addr)
		}
		code, out, errOut := runCLI(args...)
		require.Equal(t, 0, code, errOut)
		require.Contains(t, out, "With a lock, nothing was oversold.")
		var locked string
		for _, line := range strings.Split(out, "\n") {
			if strings.HasPrefix(line, "reentrant ") {
				locked = line
			}
		}
		f := strings.Fields(locked)
		require.Len(t, f, 7, out)
		require.Equal(t, []string{"30", "0", "0"}, f[2:5], "sold 30, none left, none oversold")
		if b.IsReal() {
			keys, err := b.NewClient(t).Keys(context.Background(), "rlock-demo:*").Result()
			require.NoError(t, err)
			require.Empty(t, keys, "the demo cleans up after itself")
		}
	})
}

func TestUsageErrors(t *testing.T) {
	for _, args := range [][]string{
		{},
		{"frobnicate"},
		{"demo", "--services=0"},
		{"demo", "--stock=-1"},
		{"demo", "--no-such-flag"},
		{"demo", "extra"},
		{"demo", "--redis=http://[::1"},
	} {
		code, _, errOut := runCLI(args...)
		require.Equal(t, 2, code, "%q: %s", args, errOut)
		require.NotEmpty(t, errOut)
	}
	code, out, _ := runCLI("help")
	require.Equal(t, 0, code)
	require.Contains(t, out, "rlock demo")
}

func TestUnreachableServer(t *testing.T) {
	code, _, errOut := runCLI("demo", "--progress=false", "--redis=redis://127.0.0.1:1")
	require.Equal(t, 1, code)
	require.Contains(t, errOut, "cannot reach Redis at 127.0.0.1:1")
}
