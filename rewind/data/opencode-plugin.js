// rewind's OpenCode plugin (written by `rewind hooks install opencode`; `rewind hooks uninstall opencode` removes it).
// It hands the events rewind records to rewind's hook, the same thin client a command hook runs
// (`python -S rewind/hook.py opencode`), the event's objects as JSON on its stdin. It never throws
// (a throw from a plugin blocks the tool) and imports nothing but Node's own child_process.
// A tool call waits for the hook (its file's pre-image is stored before the tool writes it), up to
// a bound; everything else OpenCode does is left alone without starting a process.
import { spawn } from "child_process";

const COMMAND = __REWIND_COMMAND__;
const WAIT_MS = 110000;       // under OpenCode's own patience; the hook answers in milliseconds
const TOOLS = new Set(["write", "edit", "bash", "patch", "multiedit", "apply_patch"]);
const EVENTS = new Set(["session.created", "session.idle", "session.deleted"]);

function send(directory, name, input, output) {
  return new Promise((resolve) => {
    let done = false;
    const finish = () => { if (!done) { done = true; clearTimeout(timer); resolve(); } };
    const timer = setTimeout(finish, WAIT_MS);
    try {
      const child = spawn(COMMAND[0], COMMAND.slice(1), {
        cwd: directory || process.cwd(), stdio: ["pipe", "ignore", "ignore"], env: process.env,
      });
      child.on("error", finish);
      child.on("close", finish);
      child.stdin.on("error", () => {});
      child.stdin.end(JSON.stringify({ hook_event_name: name, directory, input, output }));
    } catch (e) {
      finish();
    }
  });
}

export const Rewind = async (ctx) => {
  const directory = (ctx && (ctx.directory || ctx.worktree)) || process.cwd();
  const call = async (name, input, output) => {
    try { await send(directory, name, input, output); } catch (e) { /* never the agent's problem */ }
  };
  return {
    "chat.message": async (input, output) => {
      await call("chat.message", input, output && { message: output.message, parts: output.parts });
    },
    "tool.execute.before": async (input, output) => {
      if (input && TOOLS.has(input.tool)) await call("tool.execute.before", input, output && { args: output.args });
    },
    "tool.execute.after": async (input, output) => {
      if (input && TOOLS.has(input.tool)) await call("tool.execute.after", input, output && { metadata: output.metadata });
    },
    event: async ({ event }) => {
      try {
        if (!event) return;
        if (EVENTS.has(event.type)) return await call(event.type, {}, event);
        // a tool call that failed ends with no tool.execute.after: its part's error state says so
        const part = event.type === "message.part.updated" && event.properties && event.properties.part;
        if (part && part.type === "tool" && TOOLS.has(part.tool) && part.state && part.state.status === "error") {
          await call("tool.error", { tool: part.tool, sessionID: part.sessionID, callID: part.callID }, {});
        }
      } catch (e) { /* never the agent's problem */ }
    },
  };
};
