// Conformance of `hookbox serve` with the unmodified JS SDK (@google/genai 3.3.0, the newest on
// npm; it has none of the Python SDK's 3.4-3.6 methods, but its REST bodies pass through): an
// interaction, environments with mode / custom_config / system_instruction, a tool search.
// The JS SDK drops `mode` from environments.list and refuses auth_tokens/ keys for REST, so
// list(mode=) is checked with a plain request. Env: HOOKBOX_BASE_URL, HOOKBOX_TEST_KEY.
// Ends with `N passed, M failed`.
import { GoogleGenAI } from '@google/genai';

const BASE = process.env.HOOKBOX_BASE_URL;
const KEY = process.env.HOOKBOX_TEST_KEY;
const AGENT = 'antigravity-preview-09-2026';
const ai = new GoogleGenAI({ apiKey: KEY, httpOptions: { baseUrl: BASE, apiVersion: 'v1beta' } });
let passed = 0;
const failed = [];
const check = (name, ok, detail = '') => {
  console.log((ok ? 'ok   ' : 'FAIL ') + name + (ok ? '' : `: ${JSON.stringify(detail)}`));
  if (ok) passed += 1; else failed.push(name);
};
const fails = async (fn) => { try { await fn(); return ''; } catch (e) { return String(e.message ?? e); } };
const raw = async (path) => (await fetch(BASE + path, { headers: { 'x-goog-api-key': KEY } })).json();

const done = await ai.interactions.create({ agent: AGENT, input: 'run `echo from-js`' });
check('interaction: completed with the command output', done.status === 'completed'
  && JSON.stringify(done.steps).includes('from-js'), done.status);
const got = await ai.interactions.get(done.id);
check('interaction: get', got.id === done.id && got.status === 'completed', got.status);

const env = await ai.environments.create({ mode: 'on_demand', custom_config: { pool: 'js' },
  system_instruction: 'Answer in haiku.' });
check('modes: create returns mode and custom_config', env.mode === 'on_demand'
  && env.custom_config?.pool === 'js' && env.system_instruction === 'Answer in haiku.', env);
const again = await ai.environments.get({ id: env.id }).catch(() => ai.environments.get(env.id));
check('modes: get returns them', again.mode === 'on_demand' && again.custom_config?.pool === 'js', again);
const selfHosted = await raw('/v1beta/environments?mode=self_hosted&page_size=100');
const onDemand = await raw('/v1beta/environments?mode=on_demand&page_size=100');
check('modes: ?mode= filters', onDemand.environments.some((e) => e.id === env.id)
  && !(selfHosted.environments ?? []).some((e) => e.id === env.id), [onDemand, selfHosted]);
const refused = await fails(() => ai.environments.create({ mode: 'self_hosted' }));
check('modes: self_hosted is a 400 naming remote runners', refused.includes('400') && refused.includes('remote runners'), refused);

const searched = await ai.interactions.create({ agent: AGENT, input: 'search `weather`', tools: [
  { type: 'tool_search' },
  { type: 'function', name: 'get_weather', description: 'The weather.', short_description: 'Weather now.',
    defer_loading: true, parameters: { type: 'object' } }] });
const kinds = searched.steps.map((s) => s.type);
check('tool search: the steps pass through the JS SDK', kinds.includes('tool_search_call')
  && searched.steps.find((s) => s.type === 'tool_search_result')?.result?.[0]?.name === 'get_weather', kinds);

console.log(`${passed} passed, ${failed.length} failed` + (failed.length ? ': ' + failed.join(', ') : ''));
process.exit(failed.length ? 1 : 0);
