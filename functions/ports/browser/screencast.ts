import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import type { CDPSession } from 'playwright-core';
import { ENCODE_TIMEOUT_MS, type Video } from './port.js';

/** Frames per second of the encoded video (the screencast only sends a frame when the page changes). */
const VIDEO_FPS = 10;

/**
 * The video of a session, from Chrome's screencast (CDP `Page.startScreencast`), encoded while the session
 * runs: ffmpeg starts with the session and reads JPEG frames from a pipe at a steady 10 per second, each
 * the page's latest painted frame (repeated while nothing changes on the page, the first one back to the
 * moment the session opened), so the H.264 MP4 is as long as the browser session and closing
 * the session only waits for the last frames' encoding, not the whole video's (that was a fifth
 * of a warm run). Playwright's own `recordVideo` needs a Playwright-built ffmpeg that cannot be downloaded
 * offline; this needs only a system ffmpeg.
 */
export class ScreencastRecorder {
  private readonly dir: string;
  private readonly out: string;
  private ffmpeg: ChildProcess | undefined;
  private exited: Promise<void> = Promise.resolve();
  private timer: NodeJS.Timeout | undefined;
  private latest: Buffer | undefined;
  private written = 0;
  private endedAt = 0;
  private stopped = false;
  /** When the session opened: the first frame is shown from then. */
  private readonly startedAt = Date.now();

  constructor(
    private readonly cdp: CDPSession,
    tmpDir: string,
    private readonly ffmpegPath: string,
  ) {
    this.dir = mkdtempSync(join(tmpDir, 'run-video-'));
    this.out = join(this.dir, 'video.mp4');
  }

  async start(viewport: { width: number; height: number }): Promise<void> {
    const ffmpeg = spawn(
      this.ffmpegPath,
      [
        '-hide_banner',
        '-loglevel',
        'error',
        '-y',
        '-f',
        'image2pipe',
        '-framerate',
        String(VIDEO_FPS),
        '-c:v',
        'mjpeg',
        '-i',
        'pipe:0',
        '-vf',
        'scale=trunc(iw/2)*2:trunc(ih/2)*2,format=yuv420p',
        '-c:v',
        'libx264',
        '-preset',
        'veryfast',
        '-movflags',
        '+faststart',
        '-an',
        this.out,
      ],
      { stdio: ['pipe', 'ignore', 'pipe'] },
    );
    this.ffmpeg = ffmpeg;
    this.exited = exitOf(ffmpeg, this.ffmpegPath);
    this.exited.catch(() => undefined); // said by encode(), when the video is asked for
    ffmpeg.stdin!.on('error', () => undefined); // ffmpeg gone: its exit says why
    this.cdp.on('Page.screencastFrame', (frame) => {
      if (this.stopped) return;
      this.latest = Buffer.from(frame.data, 'base64');
      this.pump(Date.now());
      this.cdp.send('Page.screencastFrameAck', { sessionId: frame.sessionId }).catch(() => undefined);
    });
    this.timer = setInterval(() => this.pump(Date.now()), 1000 / VIDEO_FPS);
    await this.cdp.send('Page.startScreencast', {
      format: 'jpeg',
      quality: 80,
      maxWidth: viewport.width,
      maxHeight: viewport.height,
      everyNthFrame: 1,
    });
  }

  /** Write the latest frame as often as the time since the session opened asks for, at VIDEO_FPS. */
  private pump(until: number): void {
    const stdin = this.ffmpeg?.stdin;
    if (!this.latest || !stdin?.writable) return;
    const due = Math.max(Math.ceil(((until - this.startedAt) * VIDEO_FPS) / 1000), 1);
    for (; this.written < due; this.written++) stdin.write(this.latest);
  }

  /** Stop taking frames (the page's last one lasts until now) and let ffmpeg finish the file. */
  private finish(): void {
    if (this.stopped) return;
    this.stopped = true;
    this.endedAt = Date.now();
    clearInterval(this.timer);
    this.pump(this.endedAt);
    this.ffmpeg?.stdin?.end();
  }

  async stop(): Promise<void> {
    await this.cdp.send('Page.stopScreencast').catch(() => undefined);
    this.finish();
  }

  async encode(): Promise<Video | undefined> {
    try {
      this.finish();
      if (this.written === 0) return undefined;
      const killer = setTimeout(() => this.ffmpeg?.kill('SIGKILL'), ENCODE_TIMEOUT_MS);
      try {
        await this.exited;
      } finally {
        clearTimeout(killer);
      }
      return {
        body: readFileSync(this.out),
        contentType: 'video/mp4',
        extension: 'mp4',
        durationMs: this.endedAt - this.startedAt,
      };
    } finally {
      this.discard();
    }
  }

  discard(): void {
    clearInterval(this.timer);
    this.stopped = true;
    if (this.ffmpeg && this.ffmpeg.exitCode === null && this.ffmpeg.signalCode === null)
      this.ffmpeg.kill('SIGKILL');
    rmSync(this.dir, { recursive: true, force: true });
  }
}

/** ffmpeg's end: resolves on exit 0, otherwise says what it printed. */
function exitOf(child: ChildProcess, path: string): Promise<void> {
  return new Promise((resolve, reject) => {
    let stderr = '';
    child.stderr?.on('data', (c: Buffer) => {
      if (stderr.length < 4000) stderr += c.toString('utf8');
    });
    child.on('error', (err) => reject(new Error(`ffmpeg could not start (${path}): ${err.message}`)));
    child.on('close', (code, signal) => {
      if (code === 0) resolve();
      else reject(new Error(`ffmpeg failed (${signal ?? `exit ${code}`}): ${stderr.trim().slice(0, 500)}`));
    });
  });
}
