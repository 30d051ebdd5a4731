// k6 script for bench/injector.sh: GET a trivial handler at a constant
// arrival rate (open model), like `surgepay loadtest --scenario get`.
import http from 'k6/http';

const rate = parseInt(__ENV.RATE || '5000');
const duration = __ENV.DURATION || '20s';

export const options = {
  discardResponseBodies: true,
  summaryTrendStats: ['avg', 'p(50)', 'p(95)', 'p(99)', 'max'],
  scenarios: {
    get: { executor: 'constant-arrival-rate', rate: rate, timeUnit: '1s', duration: duration,
           preAllocatedVUs: 200, maxVUs: 5000 },
  },
};

export default function () {
  http.get(__ENV.URL || 'http://127.0.0.1:8181/healthz');
}
