ardour {
	["type"]    = "EditorHook",
	name        = "Stembridge split (acceptance test)",
	description = "Once: import $SB_SPLIT_SRC as tracks, select their regions, run the split action, save, quit",
}

function signals ()
	return LuaSignal.Set ():add ({ [LuaSignal.LuaTimerS] = true })
end

-- Run by the GUI tests of the split action (gui_split_test.sh), after the tested pattern in
-- ../shared/ardour/region-split. Environment:
--   SB_SPLIT_SRC    "Guitar=/abs/a.wav@96000,Keys=/abs/b.wav@240000" (track=file@position)
--   SB_SPLIT_TRIM   samples trimmed from the front of the first track's region
--   SB_SPLIT_GAIN   region gain of the last track's region
--   SB_SPLIT_ACTION the assembled action script; SB_SPLIT_RUNS "k=v;k=v|k=v;..." one run each
--   SB_LOG, SB_OSC_PORT
function factory (args)
	local LOG  = os.getenv ("SB_LOG") or "/tmp/stembridge-split-hook.log"
	local PORT = os.getenv ("SB_OSC_PORT") or "3819"
	local phase, ticks, measuring, ticktimes = 0, 0, false, {}
	local function now () return ARDOUR.LuaAPI.monotonic_time () / 1e6 end
	local function log (m)
		local f = io.open (LOG, "a")
		if f then f:write (string.format ("%.3f ", now ()) .. m .. "\n") f:close () end
	end
	local function quit ()
		ARDOUR.LuaOSC.Address ("osc.udp://127.0.0.1:" .. PORT):send ("/access_action", "s", "Common/Quit")
		log ("quit requested")
	end
	local function select_sources (names)
		local sl = ArdourUI.SelectionList ()
		for _, n in ipairs (names) do
			for reg in Session:route_by_name (n):to_track ():playlist ():region_list ():iter () do
				sl:push_back (Editor:regionview_from_region (reg))
			end
		end
		Editor:set_selection (sl, ArdourUI.SelectionOp.Set)
	end
	return function (signal, ref, ...)
		ticks = ticks + 1
		if phase == 1 then
			-- re-entered from inside the action (the progress window's event loop, do_import):
			-- the GUI is alive at these moments
			if measuring then table.insert (ticktimes, now ()) end
			return
		end
		if phase == 0 and ticks >= 5 then
			phase = 1
			local ok, err = pcall (function ()
				local names = {}
				for tname, file, pos in string.gmatch (os.getenv ("SB_SPLIT_SRC") or "", "([^=,]+)=([^@]+)@(%d+)") do
					local files = C.StringVector ()
					files:push_back (file)
					Editor:do_import (files, Editing.ImportDistinctFiles, Editing.ImportAsTrack,
						ARDOUR.SrcQuality.SrcBest, ARDOUR.MidiTrackNameSource.SMFTrackName,
						ARDOUR.MidiTempoMapDisposition.SMFTempoIgnore,
						Temporal.timepos_t (math.tointeger (tonumber (pos))), ARDOUR.PluginInfo (),
						ARDOUR.Track (), false)
					local r = Session:route_by_name (file:match ("([^/]+)%.%a+$"))
					assert (not r:isnil (), "the import of " .. file .. " made no track")
					r:set_name (tname)
					names[#names + 1] = tname
				end
				local trim = tonumber (os.getenv ("SB_SPLIT_TRIM") or "0")
				for reg in Session:route_by_name (names[1]):to_track ():playlist ():region_list ():iter () do
					if trim > 0 then reg:trim_front (reg:position () + Temporal.timecnt_t (trim)) end
				end
				local gain = tonumber (os.getenv ("SB_SPLIT_GAIN") or "1")
				for reg in Session:route_by_name (names[#names]):to_track ():playlist ():region_list ():iter () do
					reg:to_audioregion ():set_scale_amplitude (gain)
				end
				-- a Stembridge insert on the first track, set as a user would (CPU, the built-in
				-- model, no drums, bf16): the dialog's defaults come from it
				if os.getenv ("SB_SPLIT_PLUGIN") == "1" then
					local proc = ARDOUR.LuaAPI.new_plugin (Session, "https://stembridge.org/lv2/stembridge#stereo",
						ARDOUR.PluginType.LV2, "")
					assert (not proc:isnil (), "Stembridge not found (LV2_PATH?)")
					local t = Session:route_by_name (names[1]):to_track ()
					assert (t:add_processor_by_index (proc, 0, nil, true) == 0)
					for port, v in pairs ({ [1] = 1, [3] = 0, [5] = 0, [18] = 1 }) do
						ARDOUR.LuaAPI.set_processor_param (proc, port, v)
					end
					proc, t = nil, nil
				end
				Session:save_state ("")
				-- what the session folder holds before the action: the test compares
				log ("SOURCES READY")
				local env = setmetatable ({ ardour = function () end }, { __index = _ENV })
				assert (loadfile (os.getenv ("SB_SPLIT_ACTION"), "t", env)) ()
				for run in string.gmatch (os.getenv ("SB_SPLIT_RUNS") or "", "[^|]+") do
					select_sources (names)
					local p = { log = LOG }
					for k, v in string.gmatch (run, "([^=;]+)=([^;]*)") do p[k] = v end
					log ("SEPARATING: " .. run)
					ticktimes = {}
					measuring = true
					local t0 = now ()
					env.factory (p) ()
					measuring = false
					local gap, prev = 0, t0
					for _, x in ipairs (ticktimes) do gap = math.max (gap, x - prev); prev = x end
					log (string.format ("action returned after %.2f s; GUI timer ticks during it: %d, longest gap %.3f s",
						now () - t0, #ticktimes, math.max (gap, now () - prev)))
				end
			end)
			log (ok and "ACTION DONE" or ("ACTION ERROR: " .. tostring (err)))
			phase = 2; ticks = 0
		elseif phase == 2 and ticks >= 5 then
			phase = 3; ticks = 0
			pcall (function ()
				Editor:access_action ("Editor", "zoom-to-session")
				Editor:set_visible_track_count (12)
			end)
			Session:save_state ("")
			log ("saved; READY_FOR_SCREENSHOT")
		elseif phase == 3 and ticks >= 15 then
			phase = 4; ticks = 0
			quit ()
		elseif phase == 4 and ticks >= 100 then
			ticks = 0
			quit ()
		end
	end
end
