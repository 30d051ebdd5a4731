// shop.js: the pay page. surgepay.js (loaded before this, from surgepay)
// puts the card form in a frame that surgepay serves: this page never
// sees the card. The server wrote the publishable key, the payment's
// client secret and the order into #checkout's data attributes.
'use strict';

(() => {
  const box = document.getElementById('checkout');
  const payButton = document.getElementById('pay');
  const errorArea = document.getElementById('error');
  const { key, secret, order } = box.dataset;
  const orderURL = location.origin + '/orders/' + encodeURIComponent(order);

  // Back to this page from the order page: ask the server again (it
  // sends a paid order to its order page) rather than show a stale form.
  window.addEventListener('pageshow', (ev) => { if (ev.persisted) location.reload(); });

  const sp = Surgepay(key);
  const card = sp.card();
  card.on('change', (ev) => { if (!ev.error) errorArea.textContent = ''; });
  card.on('submit', pay); // Enter in the card form
  card.mount('#card').then(
    () => { payButton.disabled = false; },
    (err) => { errorArea.textContent = err.message; });
  payButton.addEventListener('click', pay);

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
    // The frame shows a decline or a mistake in the card at its field;
    // this page says what to do next. Other errors (the frame did not
    // answer, ...) only this page can show.
    const inFrame = r.error.type === 'card_error' || r.error.type === 'validation_error';
    errorArea.textContent = inFrame ? 'The payment was not made. Check the card details above, or use another card.'
      : r.error.message || 'The payment was not made. Please try again.';
    payButton.disabled = false; // a declined card leaves the payment awaiting another
  }
})();
