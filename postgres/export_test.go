package postgres

// Statements the tests explain, to check that they use an index.
var (
	SQLRecentPaymentMethods       = sqlRecentPaymentMethods
	SQLRecentPaymentMethodsBefore = sqlRecentPaymentMethodsBefore
	SQLAnalyticsList              = sqlAnalyticsList
)
