// surgepay.js: the library a merchant's page loads from surgepay to take a
// card payment. The card is typed into a frame served by surgepay; this
// page never sees it, and talks to the frame only by postMessage.
//
//   const sp = Surgepay('pk_test_…');
//   const card = sp.card();
//   await card.mount('#card');
//   const r = await sp.confirmPayment(clientSecret, { card });
//   // r.payment (any state but requires_action) or r.error
'use strict';

(() => {
  // The base URL is the origin this script was loaded from.
  const script = document.currentScript;
  const SCRIPT_ORIGIN = script && script.src ? new URL(script.src, window.location.href).origin : '';

  // Limits.
  const MOUNT_TIMEOUT_MS = 10000; // the frame must say ready within this
  const REQUEST_TIMEOUT_MS = 150000; // a confirm: two API calls and a retrieve, 60 s each at most in the frame
  const FRAME_HEIGHT_MAX = 2000;
  const CLIENT_SECRET_CHARS_MAX = 500;

  const EVENTS = ['ready', 'change', 'focus', 'blur', 'submit', 'error'];

  function fail(type, code, message) {
    return { type, code, message };
  }

  function originOf(base) {
    let u;
    try {
      u = new URL(base);
    } catch (_) {
      throw new Error('Surgepay: baseUrl must be an absolute URL');
    }
    if (u.protocol !== 'https:' && u.protocol !== 'http:') throw new Error('Surgepay: baseUrl must be http or https');
    return u.origin;
  }

  function Surgepay(key, options) {
    if (typeof key !== 'string' || !/^pk_(test|live)_[A-Za-z0-9_-]{1,190}$/.test(key)) {
      throw new Error('Surgepay: the key must be a publishable key (pk_test_… or pk_live_…), never a secret key');
    }
    const opts = options || {};
    const BASE = opts.baseUrl ? originOf(opts.baseUrl) : SCRIPT_ORIGIN;
    if (!BASE) throw new Error('Surgepay: cannot tell surgepay\'s address; pass {baseUrl}');

    let nextID = 1;
    let lastCard = null;
    let confirming = false;
    let leftForAction = false; // a confirm sent this page to next_action's URL

    // Back from next_action's page, a page restored from the back-forward
    // cache keeps its state: the confirm that left stays pending forever,
    // so it must not hold the guard against a second one. The shopper may
    // confirm again; the payment's state decides what that does.
    window.addEventListener('pageshow', (ev) => {
      if (ev.persisted && leftForAction) {
        leftForAction = false;
        confirming = false;
      }
    });

    function createCard(cardOptions) {
      const style = (cardOptions && cardOptions.style) || null;
      const handlers = new Map(EVENTS.map((e) => [e, []]));
      const pending = new Map(); // request id → {resolve, timer}
      let iframe = null;
      let ready = false;
      let mountTimer = null;

      function emit(type, payload) {
        for (const h of handlers.get(type) || []) {
          try {
            h(payload);
          } catch (e) {
            setTimeout(() => { throw e; }); // a handler's error must not break the card
          }
        }
      }

      function send(msg) {
        if (!iframe || !iframe.contentWindow) return false;
        iframe.contentWindow.postMessage(Object.assign({ surgepay: 1 }, msg), BASE);
        return true;
      }

      // request sends msg with a fresh id and resolves with the frame's
      // result ({payment}|{payment_method}|{error}).
      function request(msg) {
        return new Promise((resolve) => {
          if (!ready) {
            resolve({ error: fail('invalid_request_error', 'card_not_mounted', 'The card is not mounted, or not ready.') });
            return;
          }
          const id = nextID++;
          const timer = setTimeout(() => {
            pending.delete(id);
            resolve({ error: fail('api_connection_error', 'timeout', 'The card frame did not answer in time.') });
          }, REQUEST_TIMEOUT_MS);
          pending.set(id, { resolve, timer });
          send(Object.assign({}, msg, { id }));
        });
      }

      function onMessage(ev) {
        if (!iframe || ev.origin !== BASE || ev.source !== iframe.contentWindow) return;
        const m = ev.data;
        if (!m || typeof m !== 'object' || m.surgepay !== 1 || typeof m.type !== 'string') return;
        switch (m.type) {
          case 'ready':
            if (!ready) {
              ready = true;
              if (style) send({ type: 'style', style });
              emit('ready', {});
            }
            return;
          case 'change': {
            const out = { complete: m.complete === true, brand: typeof m.brand === 'string' ? m.brand : 'unknown' };
            if (m.error && typeof m.error.message === 'string') out.error = { field: String(m.error.field), message: m.error.message };
            emit('change', out);
            return;
          }
          case 'focus':
          case 'blur':
          case 'submit':
            emit(m.type, {});
            return;
          case 'resize':
            if (typeof m.height === 'number' && m.height > 0) {
              iframe.style.height = Math.min(Math.ceil(m.height), FRAME_HEIGHT_MAX) + 'px';
            }
            return;
          case 'next_action':
            if (pending.has(m.id) && typeof m.url === 'string' && /^https?:\/\//.test(m.url)) {
              const p = pending.get(m.id);
              clearTimeout(p.timer);
              pending.delete(m.id); // the page leaves: the promise stays pending
              leftForAction = true;
              window.location.assign(m.url);
            }
            return;
          case 'result': {
            const p = pending.get(m.id);
            if (!p) return;
            clearTimeout(p.timer);
            pending.delete(m.id);
            const out = {};
            if (m.error && typeof m.error === 'object') out.error = m.error;
            else if (m.payment) out.payment = m.payment;
            else if (m.payment_method) out.payment_method = m.payment_method;
            else out.error = fail('api_error', 'empty_result', 'The card frame gave no result.');
            if (out.error && m.payment) out.payment = m.payment;
            p.resolve(out);
          }
        }
      }

      const card = {
        // mount inserts the frame into target (an element or a CSS
        // selector) and resolves when it is ready; it rejects (and
        // emits 'error') if the frame does not say so within 10 s: the
        // key is unknown, or this page's origin is not among the
        // merchant's checkout origins.
        mount(target) {
          const el = typeof target === 'string' ? document.querySelector(target) : target;
          if (!el || typeof el.appendChild !== 'function') return Promise.reject(new Error('Surgepay: mount target not found'));
          if (iframe) return Promise.reject(new Error('Surgepay: the card is already mounted'));
          iframe = document.createElement('iframe');
          const src = new URL('/checkout/v1/frame', BASE);
          src.searchParams.set('key', key);
          src.searchParams.set('origin', window.location.origin);
          iframe.setAttribute('title', 'Secure card payment input');
          iframe.setAttribute('name', 'surgepay-card');
          iframe.setAttribute('referrerpolicy', 'no-referrer');
          iframe.setAttribute('scrolling', 'no');
          // No top navigation, no popups: the frame asks this page to
          // navigate (next_action) instead.
          iframe.setAttribute('sandbox', 'allow-scripts allow-same-origin allow-forms');
          iframe.style.border = '0';
          iframe.style.width = '100%';
          iframe.style.height = '170px';
          iframe.style.display = 'block';
          iframe.style.overflow = 'hidden';
          iframe.setAttribute('src', src.href);
          window.addEventListener('message', onMessage);
          lastCard = card;
          el.appendChild(iframe);
          return new Promise((resolve, reject) => {
            if (ready) {
              resolve(card);
              return;
            }
            const onReady = () => {
              clearTimeout(mountTimer);
              handlers.set('ready', handlers.get('ready').filter((h) => h !== onReady));
              resolve(card);
            };
            handlers.get('ready').unshift(onReady);
            mountTimer = setTimeout(() => {
              handlers.set('ready', handlers.get('ready').filter((h) => h !== onReady));
              const error = fail('mount_error', 'frame_not_ready',
                'The card frame did not load: check the publishable key and that this page\'s origin is among the merchant\'s checkout origins.');
              emit('error', { error });
              const e = new Error(error.message);
              e.code = error.code;
              reject(e);
            }, MOUNT_TIMEOUT_MS);
          });
        },

        unmount() {
          clearTimeout(mountTimer);
          window.removeEventListener('message', onMessage);
          for (const [, p] of pending) {
            clearTimeout(p.timer);
            p.resolve({ error: fail('invalid_request_error', 'card_unmounted', 'The card was unmounted.') });
          }
          pending.clear();
          if (iframe && iframe.parentNode) iframe.parentNode.removeChild(iframe);
          iframe = null;
          ready = false;
          if (lastCard === card) lastCard = null;
        },

        on(type, handler) {
          if (!handlers.has(type) || typeof handler !== 'function') throw new Error('Surgepay: unknown event ' + type);
          handlers.get(type).push(handler);
          return card;
        },

        off(type, handler) {
          if (handlers.has(type)) handlers.set(type, handlers.get(type).filter((h) => h !== handler));
          return card;
        },

        focus() {
          if (iframe) iframe.focus();
          send({ type: 'focus' });
        },

        clear() {
          send({ type: 'clear' });
        },

        // request is internal: Surgepay's methods use it.
        _request: request,
      };
      return card;
    }

    function checkSecret(secret) {
      return typeof secret === 'string' && secret.length <= CLIENT_SECRET_CHARS_MAX && /^pay_[A-Za-z0-9]+_secret_./.test(secret);
    }

    return {
      card: createCard,

      // confirmPayment confirms the payment that clientSecret names with
      // the card typed into options.card's frame. It resolves with
      // {payment} (any state but requires_action, which sends this page
      // to the authentication URL instead) or {error}. A call while
      // another runs rejects with an error whose code is
      // confirm_in_progress. A confirm is never re-sent by this library:
      // after a network failure the frame asks for the payment's state.
      async confirmPayment(clientSecret, options) {
        if (confirming) {
          const e = new Error('Surgepay: a confirmation is already running');
          e.code = 'confirm_in_progress';
          e.type = 'invalid_request_error';
          throw e;
        }
        const o = options || {};
        const card = o.card || lastCard;
        if (!card || typeof card._request !== 'function') {
          return { error: fail('invalid_request_error', 'card_not_mounted', 'Pass the mounted card: confirmPayment(secret, {card}).') };
        }
        if (!checkSecret(clientSecret)) {
          return { error: fail('invalid_request_error', 'client_secret_invalid', 'The client secret is malformed.') };
        }
        const msg = { type: 'confirm', client_secret: clientSecret };
        // Where the shopper comes back after 3-D Secure: this page unless
        // the merchant says otherwise.
        const ret = o.return_url !== undefined ? o.return_url : window.location.href;
        if (typeof ret !== 'string') return { error: fail('invalid_request_error', 'parameter_invalid', 'return_url must be a string.') };
        msg.return_url = new URL(ret, window.location.href).href;
        confirming = true;
        try {
          return await card._request(msg);
        } finally {
          confirming = false;
        }
      },

      // retrievePayment resolves with {payment} or {error}: the payment
      // that clientSecret names, as the mounted card's frame reads it.
      async retrievePayment(clientSecret, options) {
        const card = (options && options.card) || lastCard;
        if (!card) return { error: fail('invalid_request_error', 'card_not_mounted', 'Mount a card first.') };
        if (!checkSecret(clientSecret)) {
          return { error: fail('invalid_request_error', 'client_secret_invalid', 'The client secret is malformed.') };
        }
        return card._request({ type: 'retrieve', client_secret: clientSecret });
      },
    };
  }

  window.Surgepay = Surgepay;
})();
