package cache

import "encoding/json"

// Codec converts an entity's values to the bytes stored in Redis and back.
// Process scope stores values as they are and never calls it.
// Implementations must be safe for concurrent use.
type Codec[V any] interface {
	Marshal(v V) ([]byte, error)
	Unmarshal(b []byte) (V, error)
}

// JSON returns the default codec, encoding/json.
func JSON[V any]() Codec[V] { return jsonCodec[V]{} }

type jsonCodec[V any] struct{}

func (jsonCodec[V]) Marshal(v V) ([]byte, error) { return json.Marshal(v) }

func (jsonCodec[V]) Unmarshal(b []byte) (V, error) {
	var v V
	err := json.Unmarshal(b, &v)
	return v, err
}

// CodecFuncs makes a Codec of two functions.
type CodecFuncs[V any] struct {
	MarshalFunc   func(V) ([]byte, error)
	UnmarshalFunc func([]byte) (V, error)
}

// Marshal calls MarshalFunc.
func (c CodecFuncs[V]) Marshal(v V) ([]byte, error) { return c.MarshalFunc(v) }

// Unmarshal calls UnmarshalFunc.
func (c CodecFuncs[V]) Unmarshal(b []byte) (V, error) { return c.UnmarshalFunc(b) }
