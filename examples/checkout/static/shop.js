// shop.js: the pay page. surgepay.js (loaded before this, from surgepay)
// puts the card form in a frame that surgepay serves: this page never
// sees the card. The server wrote the publishable key, the payment's
// client secret, its status and the order into #checkout's data
// attributes.
'use strict';

(() => {
  const box = document.getElementById('checkout');
  const payButton = document.getElementById('pay');
  const continueLink = document.getElementById('continue');
  const errorArea = document.getElementById('error');
  const { key, secret, order, status } = box.dataset;
  const orderURL = location.origin + '/orders/' + encodeURIComponent(order);

  // Back to this page from the order page or the bank's page: ask the
  // server again (it sends a paid order to its order page) rather than
  // show a stale form.
  window.addEventListener('pageshow', (ev) => { if (ev.persisted) location.reload(); });

  const sp = Surgepay(key);
  const card = sp.card();
  if (status === 'requires_action') {
    // The bank waits for the shopper (3-D Secure): the payment takes no
    // card now. The frame (mounted hidden) reads where the bank's page
    // is; only the browser's view of the payment says.
    card.mount('#card').then(resume, (err) => { errorArea.textContent = err.message; });
    return;
  }
  card.on('change', (ev) => { if (!ev.error) errorArea.textContent = ''; });
  card.on('submit', pay); // Enter in the card form
  card.mount('#card').then(
    () => { payButton.disabled = false; },
    (err) => { errorArea.textContent = err.message; });
  payButton.addEventListener('click', pay);

  // resume offers the link to the bank's page of a payment awaiting
  // authentication. A payment whose authentication has ended meanwhile
  // (the shopper finished it without coming back, or it timed out: the
  // read looks it up) goes to the order page, which shows the outcome.
  async function resume() {
    let r;
    try {
      r = await sp.retrievePayment(secret, { card });
    } catch (err) {
      r = { error: err };
    }
    if (r.error) {
      if (r.error.code === 'client_secret_expired') location.reload();
      else errorArea.textContent = 'We could not reach your bank\'s page. Reload this page to try again.';
      return;
    }
    const p = r.payment;
    const next = p.next_action && p.next_action.redirect_to_url;
    if (p.status !== 'requires_action') {
      location.assign(orderURL);
      return;
    }
    if (!next || typeof next.url !== 'string' || !/^https?:\/\//.test(next.url)) {
      errorArea.textContent = 'Your bank\'s page cannot be opened from here. Check your order again in a few minutes.';
      return;
    }
    continueLink.href = next.url;
    continueLink.hidden = false;
  }

  async function pay() {
    if (payButton.disabled) return;
    payButton.disabled = true;
    errorArea.textContent = '';
    let r;
    try {
      // 3-D Secure: surgepay.js sends this page to the bank's page, which
      // comes back to return_url; the order page reads the outcome.
      r = await sp.confirmPayment(secret, { card, return_url: orderURL });
    } catch (err) {
      r = { error: err };
    }
    if (!r.error) {
      location.assign(orderURL); // the order page asks surgepay, not this page
      return;
    }
    if (r.error.code === 'client_secret_expired') {
      location.reload(); // the server reads a fresh one
      return;
    }
    if (r.error.code === 'payment_unexpected_state') {
      // The payment no longer awaits a card: this form is stale (paid
      // from another tab, or its bank's page finishing as this confirm
      // came). Nothing was charged by this attempt; the order page says
      // where the payment is.
      location.assign(orderURL);
      return;
    }
    // The frame shows a decline or a mistake in the card at its field;
    // this page says what to do next. Other errors (the frame did not
    // answer, ...) only this page can show.
    const inFrame = r.error.type === 'card_error' || r.error.type === 'validation_error';
    errorArea.textContent = inFrame ? 'The payment was not made. Check the card details above, or use another card.'
      : r.error.message || 'The payment was not made. Please try again.';
    payButton.disabled = false; // a declined card leaves the payment awaiting another
  }
})();
