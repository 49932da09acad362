// A real OpenID Connect provider (panva's oidc-provider) for approve's
// single sign-on tests and for trying it locally:
//
//   node tests/oidc/provider.js --port 9000 --redirect http://127.0.0.1:8000
//
// Issuer http://127.0.0.1:<port>; client "approve", secret "approve-secret";
// PKCE (S256) required. Sign in at its page with any password as one of the
// accounts below (the login name is the account id). Two accounts make the
// provider misbehave on purpose: "wrongaud" gets an ID token for another
// audience, "expired" one whose exp is in the past (both re-signed with the
// provider's own key, so only those claims are wrong).
import { generateKeyPair, exportJWK, SignJWT, decodeJwt } from 'jose';
import Provider from 'oidc-provider';

const args = Object.fromEntries(
  process.argv.slice(2).reduce((pairs, arg, index, all) => (
    arg.startsWith('--') ? [...pairs, [arg.slice(2), all[index + 1]]] : pairs), []),
);
const port = Number(args.port || 9000);
const site = (args.redirect || 'http://127.0.0.1:8000').replace(/\/$/, '');
const issuer = `http://127.0.0.1:${port}`;

const ACCOUNTS = {
  alice: { email: 'alice@allowed.example', email_verified: true, name: 'Alice Example', preferred_username: 'alice', groups: ['staff'] },
  unverified: { email: 'unverified@allowed.example', email_verified: false, name: 'Una Verified', preferred_username: 'una', groups: [] },
  outsider: { email: 'olga@elsewhere.example', email_verified: true, name: 'Olga Outsider', preferred_username: 'olga', groups: [] },
  grouped: { email: 'gus@elsewhere.example', email_verified: true, given_name: 'Gus', family_name: 'Grouped', preferred_username: 'gus', groups: ['approve-users'] },
  carol: { email: 'carol@allowed.example', email_verified: true, name: 'Carol Linked', preferred_username: 'carol-idp', groups: [] },
  dave: { email: 'dave@allowed.example', email_verified: true, name: 'Dave Unconfirmed', preferred_username: 'dave-idp', groups: [] },
  invited: { email: 'Ivy@Allowed.example', email_verified: true, name: 'Ivy Invited', preferred_username: 'ivy', groups: [] },
  wrongaud: { email: 'wrong@allowed.example', email_verified: true, name: 'Wrong Audience', preferred_username: 'wrong', groups: [] },
  expired: { email: 'late@allowed.example', email_verified: true, name: 'Late Token', preferred_username: 'late', groups: [] },
};

const { privateKey } = await generateKeyPair('RS256', { extractable: true });
const jwk = { ...(await exportJWK(privateKey)), kid: 'test-key', alg: 'RS256', use: 'sig' };

const provider = new Provider(issuer, {
  clients: [{
    client_id: 'approve',
    client_secret: 'approve-secret',
    redirect_uris: [`${site}/accounts/oidc/callback/`],
    post_logout_redirect_uris: [`${site}/accounts/login/`],
    token_endpoint_auth_method: 'client_secret_post',
    id_token_signed_response_alg: 'RS256',
  }],
  jwks: { keys: [jwk] },
  pkce: { required: () => true },
  scopes: ['openid', 'email', 'profile', 'groups'],
  claims: {
    openid: ['sub'],
    email: ['email', 'email_verified'],
    profile: ['name', 'given_name', 'family_name', 'preferred_username'],
    groups: ['groups'],
  },
  features: { devInteractions: { enabled: true }, rpInitiatedLogout: { enabled: true } },
  cookies: { keys: ['approve-test-provider-cookie-key'] },
  async findAccount(ctx, id) {
    if (!ACCOUNTS[id]) return undefined;
    return { accountId: id, async claims() { return { sub: id, ...ACCOUNTS[id] }; } };
  },
});

// The hostile accounts: their ID token re-signed with a wrong claim.
provider.use(async (ctx, next) => {
  await next();
  if (ctx.path !== '/token' || ctx.status !== 200 || !ctx.body || !ctx.body.id_token) return;
  const claims = decodeJwt(ctx.body.id_token);
  const now = Math.floor(Date.now() / 1000);
  let changed;
  if (claims.sub === 'wrongaud') changed = { ...claims, aud: 'another-application', azp: undefined };
  if (claims.sub === 'expired') changed = { ...claims, iat: now - 7200, exp: now - 3600 };
  if (!changed) return;
  delete changed.azp;
  ctx.body = {
    ...ctx.body,
    id_token: await new SignJWT(changed).setProtectedHeader({ alg: 'RS256', kid: 'test-key' }).sign(privateKey),
  };
});

provider.listen(port, '127.0.0.1', () => {
  console.log(`oidc-provider ready at ${issuer}`);
});
