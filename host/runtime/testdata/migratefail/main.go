// Command migratefail is a processor for the tests of store migrations: like
// plugins/countjson it declares version 2 of the store "counts" and migrates count's decimal
// counts to {"n":<count>}, but its migration fails on the count of the word "poison". Its
// records do nothing: a deploy of it is refused before they would reach it.
package main

import (
	"errors"
	"fmt"

	"github.com/statehost/statehost/pluginsdk"
)

func init() {
	pluginsdk.Register(func(pluginsdk.Context) error { return nil }, pluginsdk.WithStores("counts"),
		pluginsdk.WithStoreVersion("counts", 2, func(m *pluginsdk.Migration, key, value []byte) error {
			if string(key) == "poison" {
				return errors.New("this module cannot migrate the count of poison")
			}
			return m.Store().Put(key, fmt.Appendf(nil, `{"n":%s}`, value))
		}))
}

func main() {}
