import { execFileSync, spawnSync } from 'node:child_process';
import { chooseFfmpeg, findExecutable } from '../../functions/ports/browser/local-tools.js';

/** What a test checks of a recorded video: its duration and its first video stream. */
export interface ProbedVideo {
  durationSeconds: number;
  codec: string;
  width: number;
  height: number;
}

/**
 * A video's duration, codec and size: by ffprobe when the system has it (Debian's ffmpeg package),
 * else from the header the ffmpeg test runs use prints for `-i` (the packaged static ffmpeg has no
 * ffprobe). Throws when the file has no duration or no video stream.
 */
export function probeVideo(file: string): ProbedVideo {
  if (findExecutable('ffprobe')) {
    const probed = JSON.parse(
      execFileSync(
        'ffprobe',
        [
          '-v',
          'error',
          '-show_entries',
          'format=duration:stream=codec_name,width,height',
          '-of',
          'json',
          file,
        ],
        { encoding: 'utf8' },
      ),
    );
    const s = probed.streams[0];
    return {
      durationSeconds: Number(probed.format.duration),
      codec: s.codec_name,
      width: s.width,
      height: s.height,
    };
  }
  const ffmpeg = chooseFfmpeg();
  if (!ffmpeg) throw new Error('neither ffprobe nor ffmpeg is installed');
  // `ffmpeg -i FILE` with no output prints the input's header to stderr and exits 1.
  const { stderr } = spawnSync(ffmpeg.path, ['-hide_banner', '-i', file], { encoding: 'utf8' });
  const d = /Duration: (\d+):(\d+):(\d+(?:\.\d+)?)/.exec(stderr);
  const v = /Stream #\d+:\d+[^:]*: Video: (\w+)[^\n]*?, (\d+)x(\d+)/.exec(stderr);
  if (!d || !v) throw new Error(`not a video with a duration: ${stderr.trim().slice(0, 500)}`);
  return {
    durationSeconds: Number(d[1]) * 3600 + Number(d[2]) * 60 + Number(d[3]),
    codec: v[1]!,
    width: Number(v[2]),
    height: Number(v[3]),
  };
}
