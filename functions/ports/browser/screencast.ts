import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { CDPSession } from 'playwright-core';
import { ENCODE_TIMEOUT_MS, type Video } from './port.js';

/** Frames per second of the encoded video (the screencast only sends a frame when the page changes). */
const VIDEO_FPS = 10;

/**
 * The video of a session, from Chrome's screencast (CDP `Page.startScreencast`): each JPEG frame the
 * page paints is kept with the time it came, and on close ffmpeg turns them into an H.264 MP4 in which
 * each frame lasts until the next one came (the last until the session ended, the first from the moment
 * the session opened), so the video is as long as the browser session: a frame is repeated while nothing
 * changes on the page (issue 26). Playwright's own `recordVideo` needs a Playwright-built ffmpeg that cannot be
 * downloaded offline; this needs only a system ffmpeg.
 */
export class ScreencastRecorder {
  private readonly dir: string;
  private readonly frames: { file: string; at: number }[] = [];
  private endedAt = 0;
  private stopped = false;
  /** When the session opened: the first frame is shown from then. */
  private readonly startedAt = Date.now();

  constructor(
    private readonly cdp: CDPSession,
    tmpDir: string,
  ) {
    this.dir = mkdtempSync(join(tmpDir, 'run-frames-'));
  }

  async start(viewport: { width: number; height: number }): Promise<void> {
    this.cdp.on('Page.screencastFrame', (frame) => {
      if (this.stopped) return;
      const file = join(this.dir, `f${String(this.frames.length).padStart(6, '0')}.jpg`);
      writeFileSync(file, Buffer.from(frame.data, 'base64'));
      this.frames.push({ file, at: Date.now() });
      this.cdp.send('Page.screencastFrameAck', { sessionId: frame.sessionId }).catch(() => undefined);
    });
    await this.cdp.send('Page.startScreencast', {
      format: 'jpeg',
      quality: 80,
      maxWidth: viewport.width,
      maxHeight: viewport.height,
      everyNthFrame: 1,
    });
  }

  async stop(): Promise<void> {
    this.endedAt = Date.now();
    await this.cdp.send('Page.stopScreencast').catch(() => undefined);
    this.stopped = true;
  }

  async encode(ffmpegPath: string): Promise<Video | undefined> {
    try {
      if (this.frames.length === 0) return undefined;
      const end = this.endedAt || Date.now();
      const lines = ['ffconcat version 1.0'];
      this.frames.forEach((f, i) => {
        const from = i === 0 ? Math.min(this.startedAt, f.at) : f.at;
        const next = this.frames[i + 1]?.at ?? end;
        lines.push(`file '${f.file}'`, `duration ${(Math.max(next - from, 1) / 1000).toFixed(3)}`);
      });
      // The concat demuxer ignores the last entry's duration unless the file is listed once more.
      lines.push(`file '${this.frames[this.frames.length - 1]!.file}'`);
      const list = join(this.dir, 'frames.txt');
      writeFileSync(list, `${lines.join('\n')}\n`);
      const out = join(this.dir, 'video.mp4');
      await runFfmpeg(ffmpegPath, [
        '-hide_banner',
        '-loglevel',
        'error',
        '-y',
        '-f',
        'concat',
        '-safe',
        '0',
        '-i',
        list,
        '-vf',
        `fps=${VIDEO_FPS},scale=trunc(iw/2)*2:trunc(ih/2)*2,format=yuv420p`,
        '-c:v',
        'libx264',
        '-preset',
        'veryfast',
        '-movflags',
        '+faststart',
        '-an',
        out,
      ]);
      return {
        body: readFileSync(out),
        contentType: 'video/mp4',
        extension: 'mp4',
        durationMs: end - Math.min(this.startedAt, this.frames[0]!.at),
      };
    } finally {
      rmSync(this.dir, { recursive: true, force: true });
    }
  }

  discard(): void {
    rmSync(this.dir, { recursive: true, force: true });
  }
}

function runFfmpeg(path: string, args: string[]): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn(path, args, { stdio: ['ignore', 'ignore', 'pipe'] });
    let stderr = '';
    child.stderr.on('data', (c: Buffer) => {
      if (stderr.length < 4000) stderr += c.toString('utf8');
    });
    const timer = setTimeout(() => child.kill('SIGKILL'), ENCODE_TIMEOUT_MS);
    child.on('error', (err) => {
      clearTimeout(timer);
      reject(new Error(`ffmpeg could not start (${path}): ${err.message}`));
    });
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      if (code === 0) resolve();
      else reject(new Error(`ffmpeg failed (${signal ?? `exit ${code}`}): ${stderr.trim().slice(0, 500)}`));
    });
  });
}
