// sdk_client.mjs - `kevo mcp` driven by the official MCP client SDK (@modelcontextprotocol/sdk,
// pinned in package.json), as Claude Code or any SDK-based agent drives it: connect over
// stdio (the SDK negotiates the protocol version), list the tools (the SDK compiles every
// outputSchema and checks each structured result against it), list and read resources,
// check, eval a correct CPU candidate (ok) and an out-of-bounds one (out_of_bounds), find
// both through runs and show, and have a path outside the tree refused.
//
// usage: KEVO_BIN=build/kevo node tests/mcp/sdk_client.mjs   (make mcp-sdk-test)
// Prints a transcript; exits 1 at the first expectation that does not hold.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const root = resolve(dirname(fileURLToPath(import.meta.url)), "../..");
const kevo = resolve(root, process.env.KEVO_BIN || "build/kevo");
const scratch = mkdtempSync(join(tmpdir(), "kevo-mcp-sdk-"));
const sdk = JSON.parse(readFileSync(join(dirname(fileURLToPath(import.meta.url)),
    "node_modules/@modelcontextprotocol/sdk/package.json"), "utf8"));
const LONG = { timeout: 600000 };   // an evaluation on a small CPU takes seconds

let failures = 0;
function expect(cond, what) {
    console.log(`${cond ? "ok  " : "FAIL"} ${what}`);
    if (!cond)
        failures++;
}

async function call(client, name, args) {
    const r = await client.callTool({ name, arguments: args }, undefined, LONG);
    console.log(`\n> ${name} ${JSON.stringify(args)}\n${r.content[0].text.trimEnd()}`);
    return r;
}

async function main() {
    console.log(`node ${process.version}, @modelcontextprotocol/sdk ${sdk.version}, ${kevo} mcp`);
    const transport = new StdioClientTransport({
        command: kevo, args: ["mcp", "--archive", join(scratch, "archive.db")], cwd: root,
        env: { ...process.env }, stderr: "inherit",
    });
    const client = new Client({ name: "kevo-sdk-test", version: "1.0.0" });
    await client.connect(transport);
    const info = client.getServerVersion();
    expect(info.name === "kevo", `connected: server ${info.name} ${info.version}`);

    const tools = (await client.listTools()).tools;
    const names = tools.map(t => t.name).sort().join(",");
    expect(names === "check,eval,export,prompt,run_start,run_status,run_stop,runs,show",
           `tools/list: ${names}`);
    expect(tools.every(t => t.outputSchema && t.outputSchema.type === "object"),
           "every tool has an outputSchema");

    const res = (await client.listResources()).resources;
    expect(res.some(r => r.uri === "kevo://docs/agents"), `resources/list: ${res.length} resources`);
    const brief = await client.readResource({ uri: "kevo://docs/agents" });
    expect(brief.contents[0].text.includes("kevo mcp"), "resources/read kevo://docs/agents");

    let r = await call(client, "check", { task: "tasks/cpu/cpu_softmax_rows.c",
                                          candidate: "examples/seeds/cpu_softmax_rows.c" });
    expect(r.structuredContent.ok === true, "check: the seed compiles");

    r = await call(client, "eval", { task: "tasks/cpu/cpu_softmax_rows.c",
                                     candidate: "examples/seeds/cpu_softmax_rows.c",
                                     time_cap_s: 0.05 });
    const good = r.structuredContent;
    expect(!r.isError && good.verdict === "ok", `eval: a correct candidate is ${good.verdict}`);
    expect(good.workloads.every(w => w.speedup > 0), "eval: a speedup per workload");

    r = await call(client, "eval", { task: "tasks/cpu/cpu_vector_add.c",
                                     candidate: "tests/exploits/cpu/write_past_end.c",
                                     time_cap_s: 0.05 });
    const bad = r.structuredContent;
    expect(bad.verdict === "out_of_bounds" && bad.evidence.tensor === "z",
           `eval: the store past the end is ${bad.verdict} (tensor ${bad.evidence.tensor})`);

    r = await call(client, "runs", {});
    const runs = r.structuredContent.runs.map(x => x.id);
    expect(runs.includes(good.run) && runs.includes(bad.run), `runs: runs ${runs.join(", ")}`);
    r = await call(client, "runs", { run: good.run, candidates: true });
    expect(r.structuredContent.candidates.some(c => c.id === good.candidate && c.op === "agent"),
           `runs --candidates: candidate ${good.candidate}, op agent`);
    r = await call(client, "show", { candidate: bad.candidate });
    expect(r.structuredContent.verdict === "out_of_bounds", "show: the out-of-bounds candidate");

    r = await call(client, "eval", { task: "/etc/hostname", candidate: "x.c" });
    expect(r.isError === true && r.content[0].text.startsWith("refused"),
           "eval: a path outside the working directory is refused");

    await client.close();
    console.log(failures ? `\n${failures} expectation(s) failed` : "\nall expectations held");
}

main()
    .catch(e => { console.error(`FAIL ${e.stack || e}`); failures++; })
    .finally(() => {
        rmSync(scratch, { recursive: true, force: true });
        process.exit(failures ? 1 : 0);
    });
