package pluginsdk

import (
	"fmt"
	"time"
)

// ProcessFunc processes one record: the current record of ctx. A non-nil error fails the
// batch; the host reports the error's text with the record's offset and discards the
// instance.
type ProcessFunc func(ctx Context) error

// Option configures a registration.
type Option func(*registration)

// WithStores declares stores the processor uses. The SDK opens them when the instance
// starts, so a store the host does not have fails the instance at once, naming the store,
// instead of failing the first batch. Stores not declared can still be used: Context.Store
// opens them on first use.
func WithStores(names ...string) Option {
	return func(r *registration) { r.stores = append(r.stores, names...) }
}

// WithWindowStores declares window stores the processor uses, as WithStores does for
// key-value stores: the SDK opens them and reads their description when the instance
// starts, so a store the host does not have, or one that is not a window store, fails the
// instance at once. Context.WindowStore opens undeclared ones on first use.
func WithWindowStores(names ...string) Option {
	return func(r *registration) { r.windowStores = append(r.windowStores, names...) }
}

// WithSessionStores declares session stores the processor uses, as WithWindowStores does
// for window stores.
func WithSessionStores(names ...string) Option {
	return func(r *registration) { r.sessionStores = append(r.sessionStores, names...) }
}

// WithPunctuation asks the host to call fn every interval of stream time
// (StreamTimePunctuation) or of the host's clock (WallClockPunctuation); see
// PunctuationType for when exactly. The SDK schedules it when the instance starts. Several
// punctuations may be registered (at most abi.MaxSchedules); each gets its own schedule.
//
// The interval is whole milliseconds (a fraction is dropped) and must be at least 1ms; a
// shorter interval, an unknown kind or a nil fn make Register panic.
func WithPunctuation(kind PunctuationType, interval time.Duration, fn PunctuateFunc) Option {
	return func(r *registration) {
		switch {
		case kind != StreamTimePunctuation && kind != WallClockPunctuation:
			panic(fmt.Sprintf("pluginsdk: WithPunctuation: unknown punctuation type %d", int32(kind)))
		case interval < time.Millisecond:
			panic(fmt.Sprintf("pluginsdk: WithPunctuation: interval %v is shorter than 1ms", interval))
		case fn == nil:
			panic("pluginsdk: WithPunctuation with a nil PunctuateFunc")
		}
		r.punctuations = append(r.punctuations, punctuation{kind: kind, interval: interval, fn: fn})
	}
}

type registration struct {
	fn            ProcessFunc
	stores        []string
	windowStores  []string
	sessionStores []string
	punctuations  []punctuation
	versions      []storeVersion // migrate.go
}

// punctuation is one WithPunctuation.
type punctuation struct {
	kind     PunctuationType
	interval time.Duration
	fn       PunctuateFunc
}

var registered *registration

// Register makes fn the plugin's processor; call it once, from init().
//
// Register panics if called twice, with a nil fn or with an invalid option: that is a
// programming error found when the plugin starts (or its tests run).
func Register(fn ProcessFunc, opts ...Option) {
	if fn == nil {
		panic("pluginsdk: Register with a nil ProcessFunc")
	}
	if registered != nil {
		panic("pluginsdk: Register called twice")
	}
	r := &registration{fn: fn}
	for _, o := range opts {
		o(r)
	}
	registered = r
}
