package postgres

// Statements the tests explain, to check that they use an index.
var (
	SQLRecentPaymentMethods       = sqlRecentPaymentMethods
	SQLRecentPaymentMethodsBefore = sqlRecentPaymentMethodsBefore
	SQLAnalyticsList              = sqlAnalyticsList
)

// ParseContract is parseContract, for its table test.
var ParseContract = parseContract

// LatestMigration is the newest embedded migration's version.
func LatestMigration() int64 {
	ms, err := migrations()
	if err != nil {
		panic(err)
	}
	return ms[len(ms)-1].version
}
