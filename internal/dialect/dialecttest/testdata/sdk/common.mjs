// Shared settings of the SDK scripts: the model, the extra headers
// (SDK_HEADERS, a JSON object: memgate's identity headers), and output.
export const headers = process.env.SDK_HEADERS ? JSON.parse(process.env.SDK_HEADERS) : {};

export function need(name) {
  const v = process.env[name];
  if (!v) {
    console.error(`${name} is not set`);
    process.exit(2);
  }
  return v;
}

// run prints the JSON result of fn, or the error and exit code 1.
export async function run(fn) {
  try {
    console.log(JSON.stringify(await fn()));
  } catch (err) {
    console.error(err?.stack || String(err));
    process.exit(1);
  }
}
