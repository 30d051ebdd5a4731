// frame.js: the card frame. It collects the card, sends it straight to
// surgepay's API (same origin: no CORS), and tells the page that embeds it
// only what the page may know: readiness, completeness, the brand, error
// messages and the API's answers about the payment. It never posts card
// data to the page.
//
// The page is ORIGIN, the origin query parameter, which the server checked
// against the merchant's checkout origins before serving this frame (and
// the browser enforces the same list through frame-ancestors): messages go
// to that origin only, and are accepted only from it and from the parent.
'use strict';

(() => {
  const params = new URLSearchParams(window.location.search);
  const KEY = params.get('key') || '';
  const ORIGIN = params.get('origin') || '';
  if (window.parent === window || !/^pk_(test|live)_[A-Za-z0-9_-]+$/.test(KEY) || !/^https?:\/\/[^/?#\s]+$/.test(ORIGIN)) {
    return; // not embedded, or not served by the handler: stay inert
  }

  // Limits.
  const CLIENT_SECRET_CHARS_MAX = 500;
  const RETURN_URL_CHARS_MAX = 2048;
  const REQUEST_TIMEOUT_MS = 60000;

  const $ = (id) => document.getElementById(id);
  const form = $('card-form');
  const inputs = { number: $('number'), expiry: $('expiry'), cvc: $('cvc') };
  const errorEls = { number: $('number-error'), expiry: $('expiry-error'), cvc: $('cvc-error') };
  const brandEl = $('brand');
  const formError = $('form-error');

  const BRAND_NAMES = { visa: 'Visa', mastercard: 'Mastercard', amex: 'American Express', discover: 'Discover' };

  // ---- Messages to and from the page ----

  function post(msg) {
    window.parent.postMessage(Object.assign({ surgepay: 1 }, msg), ORIGIN);
  }

  // ---- Card rules ----

  const digitsOf = (s) => s.replace(/\D/g, '');

  function brandOf(d) {
    const p = (k) => (d.length >= k ? Number(d.slice(0, k)) : -1);
    if (d.startsWith('4')) return 'visa';
    if ((p(2) >= 51 && p(2) <= 55) || (p(4) >= 2221 && p(4) <= 2720)) return 'mastercard';
    if (p(2) === 34 || p(2) === 37) return 'amex';
    if (p(4) === 6011 || p(2) === 65 || (p(3) >= 644 && p(3) <= 649)) return 'discover';
    return 'unknown';
  }

  function luhn(d) {
    let sum = 0;
    let double = false;
    for (let i = d.length - 1; i >= 0; i--) {
      let n = d.charCodeAt(i) - 48;
      if (double) {
        n *= 2;
        if (n > 9) n -= 9;
      }
      sum += n;
      double = !double;
    }
    return sum % 10 === 0;
  }

  // numberLengths: the lengths a brand's numbers have.
  function numberLengths(brand) {
    switch (brand) {
      case 'amex': return [15];
      case 'visa': return [13, 16, 19];
      case 'mastercard': return [16];
      case 'discover': return [16, 19];
      default: return [12, 13, 14, 15, 16, 17, 18, 19];
    }
  }

  const cvcLength = (brand) => (brand === 'amex' ? 4 : 3);

  // formatNumber groups digits as they are printed on the card.
  function formatNumber(d, brand) {
    const groups = brand === 'amex' ? [4, 6, 5] : [4, 4, 4, 4, 3];
    const out = [];
    let i = 0;
    for (const g of groups) {
      if (i >= d.length) break;
      out.push(d.slice(i, i + g));
      i += g;
    }
    return out.join(' ');
  }

  function formatExpiry(d, deleting) {
    if (d.length === 1 && d > '1') d = '0' + d; // "4" is April
    if (d.length > 2) return d.slice(0, 2) + ' / ' + d.slice(2, 4);
    if (d.length === 2 && !deleting) return d + ' / ';
    return d;
  }

  function parseExpiry(v) {
    const d = digitsOf(v);
    if (d.length !== 4) return null;
    return { month: Number(d.slice(0, 2)), year: 2000 + Number(d.slice(2, 4)) };
  }

  const state = () => {
    const number = digitsOf(inputs.number.value);
    return { number, brand: number ? brandOf(number) : 'unknown' };
  };

  // validate returns the message of a field's error, or '' if it is valid.
  function validate(field) {
    const { number, brand } = state();
    switch (field) {
      case 'number':
        if (number === '') return 'Enter your card number.';
        if (!numberLengths(brand).includes(number.length)) {
          return number.length < Math.max(...numberLengths(brand)) ? 'Your card number is incomplete.' : 'Your card number is invalid.';
        }
        if (!luhn(number)) return 'Your card number is invalid.';
        return '';
      case 'expiry': {
        const d = digitsOf(inputs.expiry.value);
        if (d === '') return 'Enter your card\'s expiry date.';
        const e = parseExpiry(inputs.expiry.value);
        if (!e) return 'Your card\'s expiry date is incomplete.';
        if (e.month < 1 || e.month > 12) return 'Your card\'s expiry month is invalid.';
        const now = new Date();
        const y = now.getFullYear();
        const m = now.getMonth() + 1;
        if (e.year < y || (e.year === y && e.month < m)) return 'Your card\'s expiry date is in the past.';
        if (e.year > y + 20) return 'Your card\'s expiry year is invalid.';
        return '';
      }
      case 'cvc': {
        const c = inputs.cvc.value;
        if (c === '') return 'Enter your card\'s security code.';
        if (!/^\d+$/.test(c) || c.length !== cvcLength(brand)) return 'Your card\'s security code is incomplete.';
        return '';
      }
    }
    return '';
  }

  // ---- Errors on screen ----

  // shown holds the message each field shows ('' none).
  const shown = { number: '', expiry: '', cvc: '' };

  function showError(field, message) {
    shown[field] = message;
    errorEls[field].textContent = message;
    inputs[field].setAttribute('aria-invalid', message ? 'true' : 'false');
  }

  function showFormError(message) {
    formError.textContent = message;
  }

  // checkAll shows every field's error and returns the first invalid field.
  function checkAll() {
    let first = null;
    for (const f of Object.keys(inputs)) {
      const m = validate(f);
      showError(f, m);
      if (m && !first) first = f;
    }
    return first;
  }

  // ---- The page's view of the form ----

  let lastChange = '';

  function reportChange() {
    const { brand } = state();
    const complete = Object.keys(inputs).every((f) => validate(f) === '');
    const msg = { type: 'change', complete, brand };
    const f = Object.keys(inputs).find((k) => shown[k]);
    if (f) msg.error = { field: f, message: shown[f] };
    else if (formError.textContent) msg.error = { field: 'form', message: formError.textContent };
    const key = JSON.stringify(msg);
    if (key !== lastChange) {
      lastChange = key;
      post(msg);
    }
  }

  let lastHeight = 0;

  function reportHeight() {
    const h = Math.ceil(document.documentElement.getBoundingClientRect().height);
    if (h !== lastHeight) {
      lastHeight = h;
      post({ type: 'resize', height: h });
    }
  }

  // ---- Typing ----

  // reformat sets an input's value to its formatted text and keeps the
  // caret after the same number of digits.
  function reformat(input, text) {
    if (input.value === text) return;
    const caret = input.selectionStart ?? input.value.length;
    const atEnd = caret >= input.value.length;
    const digitsBefore = digitsOf(input.value.slice(0, caret)).length;
    input.value = text;
    if (document.activeElement !== input) return;
    let pos = text.length;
    if (!atEnd) {
      pos = 0;
      for (let seen = 0; pos < text.length && seen < digitsBefore; pos++) {
        if (/\d/.test(text[pos])) seen++;
      }
    }
    input.setSelectionRange(pos, pos);
  }

  function onNumberInput() {
    let d = digitsOf(inputs.number.value);
    const brand = d ? brandOf(d) : 'unknown';
    d = d.slice(0, Math.max(...numberLengths(brand)));
    reformat(inputs.number, formatNumber(d, brand));
    brandEl.textContent = BRAND_NAMES[brand] || '';
    inputs.cvc.maxLength = cvcLength(brand);
    if (inputs.cvc.value.length > cvcLength(brand)) inputs.cvc.value = inputs.cvc.value.slice(0, cvcLength(brand));
  }

  function onExpiryInput(ev) {
    const deleting = !!(ev && ev.inputType && ev.inputType.startsWith('delete'));
    reformat(inputs.expiry, formatExpiry(digitsOf(inputs.expiry.value).slice(0, 4), deleting));
  }

  function onCVCInput() {
    inputs.cvc.value = digitsOf(inputs.cvc.value).slice(0, cvcLength(state().brand));
  }

  const formatters = { number: onNumberInput, expiry: onExpiryInput, cvc: onCVCInput };

  for (const [field, input] of Object.entries(inputs)) {
    input.addEventListener('input', (ev) => {
      formatters[field](ev);
      if (formError.textContent) showFormError('');
      // An error on screen goes as soon as the field is right, and tracks
      // what is wrong meanwhile; a new error waits for blur or submit.
      if (shown[field]) showError(field, validate(field));
      if (field === 'number' && shown.cvc) showError('cvc', validate('cvc'));
      reportChange();
    });
    input.addEventListener('blur', () => {
      if (input.value !== '') showError(field, validate(field));
      reportChange();
    });
    input.addEventListener('focus', () => post({ type: 'focus', field }));
  }
  form.addEventListener('focusout', (ev) => {
    if (!ev.relatedTarget || !form.contains(ev.relatedTarget)) post({ type: 'blur' });
  });
  form.addEventListener('submit', (ev) => {
    ev.preventDefault(); // Enter in a field: the page decides what paying means
    const first = checkAll();
    reportChange();
    if (first) inputs[first].focus();
    post({ type: 'submit' });
  });

  // ---- The API ----

  // newIdempotencyKey returns a fresh random Idempotency-Key: one per
  // request the shopper asks for, so that a request the browser itself
  // sends again (it may resend a POST whose reused connection closed
  // before an answer) is replayed by surgepay, never done twice.
  function newIdempotencyKey() {
    const b = new Uint8Array(16);
    crypto.getRandomValues(b);
    return 'checkout_' + Array.from(b, (x) => x.toString(16).padStart(2, '0')).join('');
  }

  // api calls surgepay and returns {status, body, retryAfter}; it throws
  // only if the request may not have been answered (a network failure or
  // the timeout).
  async function api(method, path, body, idempotencyKey) {
    const ctrl = new AbortController();
    const timer = setTimeout(() => ctrl.abort(), REQUEST_TIMEOUT_MS);
    try {
      const init = {
        method,
        headers: { Authorization: 'Bearer ' + KEY },
        credentials: 'omit',
        cache: 'no-store',
        referrerPolicy: 'no-referrer',
        signal: ctrl.signal,
      };
      if (idempotencyKey) init.headers['Idempotency-Key'] = idempotencyKey;
      if (body !== undefined) {
        init.headers['Content-Type'] = 'application/json';
        init.body = JSON.stringify(body);
      }
      const res = await fetch(path, init);
      let json = null;
      try {
        json = await res.json();
      } catch (_) {
        json = null;
      }
      return { status: res.status, body: json, retryAfter: res.headers.get('Retry-After') };
    } finally {
      clearTimeout(timer);
    }
  }

  const FIELD_OF_PARAM = {
    'card.number': 'number',
    'card.exp_month': 'expiry',
    'card.exp_year': 'expiry',
    'card.cvc': 'cvc',
    cvc: 'cvc',
  };

  const DECLINE_MESSAGES = {
    incorrect_cvc: 'Your card\'s security code is incorrect.',
    expired_card: 'Your card has expired.',
    insufficient_funds: 'Your card has insufficient funds.',
    incorrect_number: 'Your card number is incorrect.',
    processing_error: 'An error occurred while processing your card. Try again in a moment.',
    lost_card: 'Your card was declined.',
    stolen_card: 'Your card was declined.',
    generic_decline: 'Your card was declined.',
  };

  // errorOf turns an API answer that is not a success into the error the
  // page gets, and shows it: at the field it names, else on the form.
  function errorOf(res) {
    const e = (res.body && typeof res.body.error === 'object' && res.body.error) || {};
    const err = {
      type: typeof e.type === 'string' ? e.type : 'api_error',
      code: typeof e.code === 'string' ? e.code : 'http_' + res.status,
      message: typeof e.message === 'string' ? e.message : 'The payment service answered ' + res.status + '.',
    };
    if (typeof e.decline_code === 'string') err.decline_code = e.decline_code;
    if (typeof e.param === 'string') err.param = e.param;
    if (res.status === 429 || res.status === 503) {
      err.type = err.type || 'api_error';
      showFormError('The payment service is busy. Please try again in a moment.');
      return err;
    }
    if (res.status === 402 || err.type === 'card_error') {
      const dc = err.decline_code || err.code;
      const msg = DECLINE_MESSAGES[dc] || 'Your card was declined.';
      if (dc === 'incorrect_cvc') showError('cvc', msg);
      else if (dc === 'expired_card') showError('expiry', msg);
      else if (dc === 'incorrect_number' || dc === 'invalid_number') showError('number', msg);
      else showFormError(msg);
      return err;
    }
    const field = FIELD_OF_PARAM[err.param];
    if (field) {
      showError(field, err.message);
    } else if (err.code === 'client_secret_invalid' || err.code === 'client_secret_expired') {
      showFormError('This payment can no longer be completed here. Please reload the page and try again.');
    } else if (err.code === 'payment_unexpected_state') {
      // Paid, being processed, or awaiting the bank's authentication:
      // never charged again from here.
      showFormError('This payment is already under way. Reload the page to see where it stands.');
    } else if (res.status >= 500) {
      showFormError('Something went wrong on our side. Please try again in a moment.');
    } else {
      showFormError(err.message || 'The payment could not be completed.');
    }
    return err;
  }

  // paymentIDOf returns the payment's ID named by a client secret, or ''.
  function paymentIDOf(secret) {
    if (typeof secret !== 'string' || secret.length > CLIENT_SECRET_CHARS_MAX) return '';
    const i = secret.indexOf('_secret_');
    if (i <= 0) return '';
    const id = secret.slice(0, i);
    return /^pay_[A-Za-z0-9]+$/.test(id) ? id : '';
  }

  const invalidSecret = () => ({ type: 'invalid_request_error', code: 'client_secret_invalid', message: 'The client secret is malformed.' });
  const connectionError = () => ({
    type: 'api_connection_error',
    code: 'network_error',
    message: 'The payment service could not be reached.',
  });

  async function retrieve(secret) {
    const id = paymentIDOf(secret);
    if (!id) return { error: invalidSecret() };
    let res;
    try {
      res = await api('GET', '/v1/checkout/payments/' + id + '?client_secret=' + encodeURIComponent(secret));
    } catch (_) {
      return { error: connectionError() };
    }
    if (res.status === 200 && res.body && res.body.object === 'payment') return { payment: res.body };
    return { error: errorOf(res) };
  }

  // outcome turns a payment view into the page's result: a payment left
  // requiring a payment method by a decline is the decline.
  function outcome(p) {
    if (p.status === 'requires_payment_method' && p.last_payment_error) {
      const e = p.last_payment_error;
      return { error: errorOf({ status: 402, body: { error: Object.assign({ type: 'card_error', payment: p.id }, e) } }), payment: p };
    }
    return { payment: p };
  }

  let busy = false;

  async function confirm(msg) {
    const secret = msg.client_secret;
    const id = paymentIDOf(secret);
    if (!id) {
      showFormError('This payment can no longer be completed here. Please reload the page and try again.');
      return { error: invalidSecret() };
    }
    const body = { client_secret: secret };
    if (typeof msg.return_url === 'string' && msg.return_url !== '') {
      if (msg.return_url.length > RETURN_URL_CHARS_MAX || !/^https?:\/\//.test(msg.return_url)) {
        return { error: { type: 'invalid_request_error', code: 'parameter_invalid', param: 'return_url', message: 'return_url must be an http or https URL.' } };
      }
      body.return_url = msg.return_url;
    }
    showFormError('');
    const first = checkAll();
    reportChange();
    if (first) {
      inputs[first].focus();
      return { error: { type: 'validation_error', code: 'incomplete_card', param: first, message: shown[first] } };
    }
    const exp = parseExpiry(inputs.expiry.value);
    const cvc = inputs.cvc.value;
    const card = { number: state().number, exp_month: exp.month, exp_year: exp.year, cvc };
    const idem = newIdempotencyKey();
    let res;
    try {
      res = await api('POST', '/v1/checkout/payment_methods', { card }, idem + '_pm');
    } catch (_) {
      // Nothing is charged by a payment method: safe to report and let
      // the shopper press pay again.
      showFormError('We could not reach the payment service. Check your connection and try again.');
      return { error: connectionError() };
    }
    if (res.status !== 200 || !res.body || typeof res.body.id !== 'string') return { error: errorOf(res) };
    body.payment_method = res.body.id;
    body.cvc = cvc;
    try {
      res = await api('POST', '/v1/checkout/payments/' + id + '/confirm', body, idem + '_confirm');
    } catch (_) {
      // The confirm may have reached surgepay: never send it again blind;
      // ask what became of the payment.
      const r = await retrieve(secret);
      if (r.payment) return finish(r.payment, msg.id);
      showFormError('We could not confirm whether your payment went through. Check your connection before trying again.');
      return { error: connectionError() };
    }
    if (res.status === 200 && res.body && res.body.object === 'payment') return finish(res.body, msg.id);
    return { error: errorOf(res) };
  }

  // finish returns the page's result for a payment view, or undefined if
  // the page is sent to next_action's URL instead.
  function finish(p, id) {
    const na = p.next_action;
    if (p.status === 'requires_action' && na && na.type === 'redirect_to_url' && na.redirect_to_url &&
        typeof na.redirect_to_url.url === 'string' && /^https?:\/\//.test(na.redirect_to_url.url)) {
      post({ type: 'next_action', id, url: na.redirect_to_url.url });
      return undefined;
    }
    const out = outcome(p);
    if (!out.error) {
      for (const f of Object.keys(inputs)) showError(f, '');
    }
    return out;
  }

  async function handle(msg) {
    switch (msg.type) {
      case 'confirm': {
        if (busy) {
          post({ type: 'result', id: msg.id, error: { type: 'invalid_request_error', code: 'confirm_in_progress', message: 'A confirmation is already running.' } });
          return;
        }
        busy = true;
        let r;
        try {
          r = await confirm(msg);
        } catch (e) {
          showFormError('Something went wrong. Please try again.');
          r = { error: { type: 'api_error', code: 'frame_error', message: 'The card frame failed.' } };
        } finally {
          busy = false;
        }
        reportChange();
        if (r) post(Object.assign({ type: 'result', id: msg.id }, r));
        return;
      }
      case 'retrieve': {
        const r = await retrieve(msg.client_secret);
        post(Object.assign({ type: 'result', id: msg.id }, r));
        return;
      }
      case 'focus':
        inputs[Object.keys(inputs).find((f) => shown[f]) || 'number'].focus();
        return;
      case 'clear':
        for (const f of Object.keys(inputs)) {
          inputs[f].value = '';
          showError(f, '');
        }
        brandEl.textContent = '';
        showFormError('');
        reportChange();
        return;
      case 'style':
        applyStyle(msg.style);
        return;
    }
  }

  // applyStyle sets the few properties a page may choose, each checked
  // against a narrow pattern (through the CSSOM, which the CSP allows).
  function applyStyle(style) {
    if (!style || typeof style !== 'object') return;
    const rules = {
      color: /^(#[0-9a-fA-F]{3,8}|[a-z]{3,20})$/,
      fontSize: /^\d{1,2}(\.\d)?px$/,
      fontFamily: /^[A-Za-z0-9 ,'"-]{1,100}$/,
    };
    for (const [k, re] of Object.entries(rules)) {
      if (typeof style[k] === 'string' && re.test(style[k])) document.body.style[k] = style[k];
    }
    reportHeight();
  }

  window.addEventListener('message', (ev) => {
    if (ev.origin !== ORIGIN || ev.source !== window.parent) return;
    const msg = ev.data;
    if (!msg || typeof msg !== 'object' || msg.surgepay !== 1 || typeof msg.type !== 'string') return;
    if (msg.id !== undefined && typeof msg.id !== 'number') return;
    handle(msg);
  });

  if (typeof ResizeObserver === 'function') new ResizeObserver(reportHeight).observe(document.documentElement);
  reportHeight();
  post({ type: 'ready' });
  reportChange();
})();
