// Package contract holds what the stores' migrations share: the contract
// directive of a migration that removes what older releases use
// (docs/upgrade.md).
package contract

import (
	"fmt"
	"regexp"
	"strconv"
)

// contractLine is a contract migration's directive, at the start of a line.
var contractLine = regexp.MustCompile(`(?m)^-- contract: binaries before (\d+)\b`)

// Parse returns the migration version that the contract directive
// ("-- contract: binaries before NNNN") of migration version names, or 0
// when sql has none. A contract names a migration at or below its own (at
// its own: no earlier release may run on the schema once it is applied)
// and above 0, and is numbered above contractsVersion, the store's
// migration that added schema_migrations.contract_before.
func Parse(version, contractsVersion int64, sql string) (int64, error) {
	found := contractLine.FindAllStringSubmatch(sql, -1)
	if len(found) == 0 {
		return 0, nil
	}
	if len(found) > 1 {
		return 0, fmt.Errorf("%d contract lines, want one", len(found))
	}
	before, err := strconv.ParseInt(found[0][1], 10, 64)
	switch {
	case err != nil || before <= 0 || before > version:
		return 0, fmt.Errorf("contract: binaries before %s: want a migration from 0001 to this one (%04d)", found[0][1], version)
	case version <= contractsVersion:
		return 0, fmt.Errorf("a contract needs migration %04d (schema_migrations.contract_before), numbered below it", contractsVersion)
	}
	return before, nil
}
