package scripts_test

import (
	"errors"
	"fmt"
	"io/fs"
	"strings"

	"github.com/rlock-go/rlock/scripts"
)

// Files lets you read the Lua that rlock runs on the server.
func Example() {
	lua, err := fs.ReadFile(scripts.Files(), "lock.lua")
	if err != nil {
		panic(err)
	}
	fmt.Println("lock.lua calls redis:", strings.Contains(string(lua), "redis.call"))
	_, err = fs.Stat(scripts.Files(), "missing.lua")
	fmt.Println("missing.lua not found:", errors.Is(err, fs.ErrNotExist))
	// Output:
	// lock.lua calls redis: true
	// missing.lua not found: true
}
