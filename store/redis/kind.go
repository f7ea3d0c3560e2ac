package redis

import (
	"errors"
	"strings"

	"github.com/oncehook/oncehook/store"
)

// Front is Redis as the layer in front of a store (redis: redis://...).
func Front() store.Front {
	return store.Front{
		Name: "redis",
		Check: func(url string) error {
			if !strings.HasPrefix(url, "redis://") && !strings.HasPrefix(url, "rediss://") {
				return errors.New("want redis://host:port/db")
			}
			return nil
		},
		Open: func(url string, inner store.Store, o store.FrontOptions) (store.Store, error) {
			return Open(url, inner, Options{Logger: o.Logger, OnHit: o.OnHit, OnError: o.OnError})
		},
	}
}
