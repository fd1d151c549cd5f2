//go:build pins

// Package pins keeps franz-go's modules in go.mod and go.sum: the franz-go suite runs the
// pinned release's own kgo tests (go_clients.py), which no program here imports.
package pins

import (
	_ "github.com/twmb/franz-go/pkg/kadm"
	_ "github.com/twmb/franz-go/pkg/kgo"
	_ "github.com/twmb/franz-go/pkg/kmsg"
)
